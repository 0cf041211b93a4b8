#include "convert/convert_stream.h"

#include <algorithm>
#include <cstring>

#include "kernels/convert.h"

namespace pb {
namespace {
constexpr size_t kBlockBytes = 256 * 1024;  // output staging; bounds memory whatever the tensor size
}

Result<ConversionPlan> PlanConversion(const Header& source, Dtype target, TensorOrder order) {
  if (!IsConvertibleFloat(target))
    return MakeError(ErrorCode::UnsupportedDtype, "cannot convert to " + std::string(DtypeName(target)) +
                                                      "; targets are F16, BF16, F32, F64, F8_E4M3, F8_E5M2");
  std::vector<TensorSpec> specs;
  specs.reserve(source.tensor_count());
  ConversionPlan plan;
  for (size_t i = 0; i < source.tensor_count(); ++i) {
    TensorInfo t = source.tensor(i);
    Dtype out = IsConvertibleFloat(t.dtype) ? target : t.dtype;
    specs.push_back({std::string(t.name), out, std::vector<uint64_t>(t.shape.begin(), t.shape.end())});
  }
  std::optional<Metadata> metadata;
  if (source.has_metadata()) metadata = source.metadata();
  auto write = PlanWrite(specs, metadata, order);
  if (!write.ok()) return write.error();
  plan.write = std::move(write.value());
  for (const PlannedTensor& p : plan.write.tensors) {
    Dtype from = source.tensor(p.input_index).dtype;
    plan.source_tensor.push_back(p.input_index);
    plan.source_dtype.push_back(from);
    plan.target_dtype.push_back(specs[p.input_index].dtype);
    if (from != specs[p.input_index].dtype) ++plan.converted_count;
  }
  return plan;
}

TensorBytesConverter::TensorBytesConverter(ConversionPlan plan, ByteSink& sink)
    : plan_(std::move(plan)), writer_(plan_.write, sink) {}

Status TensorBytesConverter::Begin() { return writer_.Begin(); }

void TensorBytesConverter::AdvanceToNonEmpty() {
  // Moves past finished tensors (and zero-size ones) so current_ names the tensor the next byte feeds.
  while (current_ < plan_.write.tensors.size()) {
    const PlannedTensor& p = plan_.write.tensors[current_];
    uint64_t out_bytes = p.end - p.begin;
    uint64_t in_bits =
        out_bytes * 8 / DtypeBits(plan_.target_dtype[current_]) * DtypeBits(plan_.source_dtype[current_]);
    if (consumed_ < in_bits / 8) break;
    ++current_;
    consumed_ = 0;
  }
}

Status TensorBytesConverter::Push(std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    AdvanceToNonEmpty();
    if (current_ >= plan_.write.tensors.size())
      return MakeError(ErrorCode::InvalidArgument, "more source bytes than the plan's tensors hold");
    const PlannedTensor& p = plan_.write.tensors[current_];
    Dtype from = plan_.source_dtype[current_], to = plan_.target_dtype[current_];
    uint64_t numel = (p.end - p.begin) * 8 / DtypeBits(to);
    uint64_t in_total = numel * DtypeBits(from) / 8;
    size_t take = static_cast<size_t>(std::min<uint64_t>(bytes.size(), in_total - consumed_));
    std::span<const uint8_t> part = bytes.first(take);
    bytes = bytes.subspan(take);
    consumed_ += take;
    if (from == to) {
      PB_RETURN_IF_ERROR(writer_.Write(part));
      continue;
    }
    const size_t in_size = DtypeBits(from) / 8, out_size = DtypeBits(to) / 8;
    if (block_.empty()) block_.resize(kBlockBytes);
    // Complete an element split across pushes.
    if (carry_len_ > 0) {
      size_t need = std::min(in_size - carry_len_, part.size());
      std::memcpy(carry_ + carry_len_, part.data(), need);
      carry_len_ += need;
      part = part.subspan(need);
      if (carry_len_ < in_size) continue;
      kernels::ConvertElements(from, to, carry_, block_.data(), 1);
      carry_len_ = 0;
      PB_RETURN_IF_ERROR(writer_.Write(std::span<const uint8_t>(block_.data(), out_size)));
    }
    const size_t per_block = kBlockBytes / std::max(in_size, out_size) / 2 * 2;
    while (part.size() >= in_size) {
      // Convert straight into the sink's buffer when it lends one; otherwise stage and Write.
      std::span<uint8_t> lent = writer_.Lend(part.size() / in_size * out_size);
      if (lent.size() >= out_size) {
        size_t n = lent.size() / out_size;
        kernels::ConvertElements(from, to, part.data(), lent.data(), n);
        PB_RETURN_IF_ERROR(writer_.Commit(n * out_size));
        part = part.subspan(n * in_size);
        continue;
      }
      size_t n = std::min(part.size() / in_size, per_block);
      kernels::ConvertElements(from, to, part.data(), block_.data(), n);
      PB_RETURN_IF_ERROR(writer_.Write(std::span<const uint8_t>(block_.data(), n * out_size)));
      part = part.subspan(n * in_size);
    }
    std::memcpy(carry_, part.data(), part.size());
    carry_len_ = part.size();
  }
  return Status::Ok();
}

Status TensorBytesConverter::Finish() {
  AdvanceToNonEmpty();
  if (current_ < plan_.write.tensors.size())
    return MakeError(ErrorCode::InvalidArgument, "source ended before all planned tensor bytes arrived");
  return writer_.Finish();
}

Status StreamingConverter::OnHeader(const Header& header) {
  PB_ASSIGN_OR_RETURN(auto plan, PlanConversion(header, target_, TensorOrder::kInput));
  converter_ = std::make_unique<TensorBytesConverter>(std::move(plan), sink_);
  return converter_->Begin();
}

Status StreamingConverter::OnTensorData(size_t, uint64_t, std::span<const uint8_t> bytes) {
  return converter_->Push(bytes);
}

Status StreamingConverter::Finish() {
  PB_RETURN_IF_ERROR(reader_.Finish(*this));
  return converter_->Finish();
}

}  // namespace pb
