#include "app/convert_job.h"

#include <algorithm>
#include <cstring>

#include "app/report.h"
#include "core/dtype_vocabulary.h"
#include "kernels/convert.h"

namespace pb::app {

ConvertOptions ConvertOptionsFromLine(const CommandLine& line, std::optional<uint64_t> input_size) {
  ConvertOptions options;
  options.target = *ParseFloatDtypeName(*line.Value("dtype"));  // checked by the grammar
  options.order = line.Value("order") == "input" ? TensorOrder::kInput : TensorOrder::kReference;
  options.input_size = input_size;
  options.json = line.Has("json");
  options.tell_plan = !options.json && !line.Has("quiet");
  return options;
}

ConvertJob::ConvertJob(ConvertOptions options)
    : options_(std::move(options)), reader_(ReaderOptions{options_.input_size}) {}

std::optional<uint64_t> ConvertJob::output_size() const {
  if (!plan_) return std::nullopt;
  return plan_->write.total_size();
}

std::string ConvertJob::summary_json() const { return plan_ ? RenderConvertJson(*plan_, *reader_.header()) : ""; }

uint64_t ConvertJob::InputTotal() const {
  if (options_.input_size) return *options_.input_size;
  return reader_.header() ? reader_.header()->file_size() : 0;
}

Result<job::Step> ConvertJob::Advance() {
  if (write_pending_) {
    write_pending_ = false;
    return job::Step::Write(0, write_at_, std::span<const uint8_t>(out_.get(), out_len_));
  }
  if (progress_pending_) {
    progress_pending_ = false;
    return job::Step::Progress(0, read_done_, InputTotal());
  }
  switch (phase_) {
    case Phase::kPolicy:
      // OUT may replace a file, never IN (whatever the path: a hard link, a path through a link to IN's directory).
      if (options_.output) {
        const auto& check = *options_.output;
        PB_ASSIGN_OR_RETURN(output_plan_, PlanOutput("convert", check.inputs, check.out, check.flags));
      }
      phase_ = Phase::kHeader;
      [[fallthrough]];
    case Phase::kHeader:
      if (!reader_.header_done()) {
        const uint64_t fed = reader_.bytes_fed();
        return job::Step::ReadHeader(0, fed, fed + std::max<uint64_t>(1, reader_.bytes_until_header()));
      }
      phase_ = Phase::kPlan;
      [[fallthrough]];
    case Phase::kPlan: {
      PB_ASSIGN_OR_RETURN(auto plan, PlanConversion(*reader_.header(), options_.target, options_.order));
      plan_ = std::move(plan);
      plan_text_ = RenderConvertText(*plan_, *reader_.header());
      phase_ = Phase::kMessage;
      [[fallthrough]];
    }
    case Phase::kMessage:
      // The text is the plan, told before the work starts; the JSON, one document, once the output is in place.
      phase_ = Phase::kOutputHeader;
      if (options_.tell_plan) return job::Step::Message(plan_text_);
      [[fallthrough]];
    case Phase::kOutputHeader: {
      phase_ = Phase::kTensors;
      const std::string& header = plan_->write.header;
      progress_pending_ = true;
      return job::Step::Write(0, 0, std::span(reinterpret_cast<const uint8_t*>(header.data()), header.size()));
    }
    case Phase::kTensors: {
      const Header& source = *reader_.header();
      while (tensor_ < plan_->write.tensors.size()) {
        const TensorInfo t = source.tensor(plan_->source_tensor[tensor_]);
        if (consumed_ < t.end - t.begin) break;
        ++tensor_;
        consumed_ = 0;
      }
      if (tensor_ == plan_->write.tensors.size()) {
        phase_ = Phase::kEnd;
        return Advance();
      }
      const PlannedTensor& p = plan_->write.tensors[tensor_];
      const TensorInfo t = source.tensor(plan_->source_tensor[tensor_]);
      const uint64_t from = source.data_start() + t.begin + consumed_;
      const uint64_t out_header = plan_->write.header.size();
      const bool same = plan_->source_dtype[tensor_] == plan_->target_dtype[tensor_];
      if (same && options_.input_size) {
        // Unchanged bytes pass through: the executor copies them (in the kernel where it can). A stream's are
        // read and written back instead, so that its end is always the job's to judge.
        const uint64_t n = t.end - t.begin - consumed_;
        if (options_.order == TensorOrder::kInput) PB_RETURN_IF_ERROR(reader_.Skip(n));
        job::Step step = job::Step::Forward(0, from, from + n, 0, out_header + p.begin + consumed_);
        consumed_ += n;
        read_done_ += n;
        progress_pending_ = true;
        return step;
      }
      // Whole elements per piece, so that a complete supply converts without a carry.
      const uint64_t in_size = same ? 1 : DtypeBits(plan_->source_dtype[tensor_]) / 8;
      const uint64_t piece = kConvertReadPiece / in_size * in_size;
      return job::Step::Read(0, from, from + std::min(piece, t.end - t.begin - consumed_));
    }
    case Phase::kEnd:
      // A stream of unknown size must end where the header says the file ends: trailing bytes are an error.
      if (options_.order == TensorOrder::kInput && !options_.input_size) {
        const uint64_t end = reader_.header()->file_size();
        return job::Step::Read(0, end, end + 1);
      }
      phase_ = Phase::kDone;
      [[fallthrough]];
    case Phase::kDone: summary_ = options_.json ? RenderConvertJson(*plan_, *reader_.header()) : ""; return job::Step{};
  }
  return job::Step{};
}

Status ConvertJob::InputEnded() {
  // A stream's end inside the header, or inside a tensor read in input order: the reader's error.
  if (phase_ == Phase::kHeader || options_.order == TensorOrder::kInput) PB_RETURN_IF_ERROR(reader_.Finish(*this));
  if (phase_ == Phase::kEnd) {
    phase_ = Phase::kDone;
    return Status::Ok();
  }
  const uint64_t at = reader_.header() ? reader_.header()->data_start() + consumed_ : reader_.bytes_fed();
  return MakeError(ErrorCode::IoError, "source ended at byte " + std::to_string(at) + ", inside a tensor", std::nullopt,
                   at);
}

Status ConvertJob::Accept(std::span<const uint8_t> bytes) {
  out_len_ = 0;
  Status status = Status::Ok();
  if (bytes.empty()) {
    status = InputEnded();
  } else if (phase_ == Phase::kHeader) {
    status = reader_.Feed(bytes, *this);
    read_done_ += bytes.size();
  } else if (phase_ == Phase::kEnd) {
    status = reader_.Feed(bytes, *this);  // trailing bytes: the reader's error
    if (status.ok()) status = MakeError(ErrorCode::MetadataIncompleteBuffer, "trailing bytes after the last tensor");
  } else {
    status = SupplyTensor(bytes);
  }
  if (!status.ok()) return Fail(status.error());
  return Status::Ok();
}

Status ConvertJob::SupplyTensor(std::span<const uint8_t> bytes) {
  if (options_.order == TensorOrder::kInput) PB_RETURN_IF_ERROR(reader_.Feed(bytes, *this));
  const Dtype from = plan_->source_dtype[tensor_], to = plan_->target_dtype[tensor_];
  // Bytes of a stream that keep their dtype (sub-byte ones included) are copied as bytes.
  const bool same = from == to;
  const size_t in_size = same ? 1 : DtypeBits(from) / 8, out_size = same ? 1 : DtypeBits(to) / 8;
  const PlannedTensor& p = plan_->write.tensors[tensor_];
  // The output offset of the first whole element this supply completes.
  write_at_ = plan_->write.header.size() + p.begin + (consumed_ - carry_len_) / in_size * out_size;
  consumed_ += bytes.size();
  read_done_ += bytes.size();
  out_len_ = (carry_len_ + bytes.size()) / in_size * out_size;
  if (out_len_ > out_capacity_) {
    out_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, (out_len_ + 4095) / 4096 * 4096)));
    out_capacity_ = out_ ? out_len_ : 0;
    if (!out_)
      return MakeError(ErrorCode::IoError, "out of memory: cannot reserve " + std::to_string(out_len_) + " bytes");
  }
  uint8_t* dst = out_.get();
  if (carry_len_ > 0) {  // complete an element split across supplies
    const size_t need = std::min(in_size - carry_len_, bytes.size());
    std::memcpy(carry_ + carry_len_, bytes.data(), need);
    carry_len_ += need;
    bytes = bytes.subspan(need);
    if (carry_len_ == in_size) {
      kernels::ConvertElements(from, to, carry_, dst, 1);
      dst += out_size;
      carry_len_ = 0;
    }
  }
  const size_t n = bytes.size() / in_size;
  if (same && n > 0) std::memcpy(dst, bytes.data(), n);
  else if (!same) kernels::ConvertElements(from, to, bytes.data(), dst, n);
  bytes = bytes.subspan(n * in_size);
  std::memcpy(carry_ + carry_len_, bytes.data(), bytes.size());
  carry_len_ += bytes.size();
  write_pending_ = out_len_ > 0;
  progress_pending_ = true;
  return Status::Ok();
}

}  // namespace pb::app
