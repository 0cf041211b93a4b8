#include "app/translate_job.h"

#include <algorithm>

#include "adapter/adapter_report.h"
#include "adapter/tensor_fetch.h"
#include "app/translate_output.h"
#include "gguf/gguf_format.h"

namespace pb::app {

TranslateOptions TranslateOptionsFromLine(const CommandLine& line, bool info) {
  TranslateOptions o;
  o.info = info;
  // Every value below is a choice the grammar checked.
  if (auto from = line.Value("from")) o.read.format = adapter::ParseFormatName(*from);
  o.read.arch = line.Value("arch");
  o.read.strict = line.Has("strict");
  o.json = line.Has("json");
  o.quiet = line.Has("quiet");
  if (info) return o;
  o.to = *adapter::ParseFormatName(*line.Value("to"));
  o.dry_run = line.Has("dry-run");
  o.write.strict = o.read.strict;
  o.write.compat_pre_014 = line.Has("old-peft");
  o.write.allow_partial = line.Has("allow-partial");
  if (auto outtype = line.Value("outtype")) o.write.gguf_outtype = *gguf::ParseOutType(*outtype);
  // OUT.gguf is one file, named as the user named it (else OUT_DIR gets the format's names).
  if (line.positional.size() > 1 && TranslateOutputIsFile(o.to, line.positional[1]))
    o.write.weights_name = TranslateOutputNames(o.to, line.positional[1]).front();
  return o;
}

TranslateJob::TranslateJob(TranslateOptions options) : options_(std::move(options)) {
  if (!options_.read.tables) options_.read.tables = options_.tables.get();
  if (!options_.write.tables) options_.write.tables = options_.tables.get();
}

std::vector<std::string> TranslateJob::output_names() const {
  if (!result_) return {};
  std::vector<std::string> names{result_->output.weights_name};
  if (result_->output.config_name) names.push_back(*result_->output.config_name);
  return names;
}

// A header error names the weights file, as the adapter's readers do.
Error TranslateJob::Named(Error error) const {
  error.message = options_.weights_name + ": " + error.message;
  return error;
}

Status TranslateJob::ReadAdapterNow() {
  const adapter::AdapterSource source{options_.weights_name,    {}, config_, base_config_, &header_, inline_,
                                      gguf_ ? &*gguf_ : nullptr};
  adapter_read_ = true;
  if (options_.info) {
    PB_ASSIGN_OR_RETURN(auto read, adapter::ReadAdapter(source, options_.read));
    read_ = std::make_unique<adapter::ReadResult>(std::move(read));
    norms_ = std::make_unique<adapter::DeltaNormPass>(read_->adapter);  // module by module, each one's factors read
    consumer_ = norms_.get();
    phase_ = Phase::kServe;
    return Status::Ok();
  }
  PB_ASSIGN_OR_RETURN(auto result, adapter::Translate(source, options_.to, options_.read, options_.write));
  result_ = std::make_unique<adapter::TranslateResult>(std::move(result));
  phase_ = Phase::kPolicy;
  return Status::Ok();
}

Result<job::Step> TranslateJob::Advance() {
  if (written_out_) {
    written_.bytes.clear();
    written_out_ = false;
  }
  for (;;) {
    if (!written_.bytes.empty()) {
      written_out_ = true;
      const job::Step step = job::Step::Write(0, write_at_, written_.bytes);
      write_at_ += written_.bytes.size();
      return step;
    }
    if (progress_pending_) {
      progress_pending_ = false;
      return job::Step::Progress(0, supplied_, options_.weights_size);
    }
    const uint64_t size = options_.weights_size;
    switch (phase_) {
      case Phase::kConfigs: {
        // The configs first, whole, as the front ends read them before the weights' header.
        for (; text_input_ <= 2; ++text_input_) {
          const auto& text_size = text_input_ == 1 ? options_.config_size : options_.base_config_size;
          auto& text = text_input_ == 1 ? config_ : base_config_;
          if (!text_size) continue;
          if (!text) text.emplace();
          if (text->size() < *text_size) return job::Step::Read(text_input_, text->size(), *text_size);
        }
        phase_ = Phase::kPrefix;
        continue;
      }
      case Phase::kPrefix: {
        // The first bytes say which container it is: a .gguf file's magic, else a safetensors header's length.
        const uint64_t want = std::min<uint64_t>(8, size);
        if (head_.size() < want) return job::Step::ReadHeader(0, head_.size(), want);
        if (head_.size() >= 4 && gguf::LooksLikeGguf(std::span(head_.data(), 4))) {
          head_want_ = std::min(size, gguf::kFirstReadBytes);
          phase_ = Phase::kGguf;
          continue;
        }
        auto length = ReadHeaderLength(head_, size);
        if (!length.ok()) return Named(length.error());
        head_want_ = 8 + length.value();
        phase_ = Phase::kJson;
        continue;
      }
      case Phase::kGguf: {
        // The parse asks for more of the file's start until it holds the whole header.
        if (head_.size() < head_want_) return job::Step::ReadHeader(0, head_.size(), head_want_);
        auto parse = gguf::ParseGgufHeader(head_, size);
        if (!parse.ok()) return Named(parse.error());
        if (parse->file) {
          gguf_ = std::move(*parse->file);
          head_.clear();
          PB_RETURN_IF_ERROR(ReadAdapterNow());
          continue;
        }
        if (parse->need <= head_.size())
          return Named(MakeError(ErrorCode::InvalidArgument, "the GGUF header's parse asked for no more bytes"));
        head_want_ = parse->need;
        continue;
      }
      case Phase::kJson: {
        if (head_.size() < head_want_) return job::Step::ReadHeader(0, head_.size(), head_want_);
        auto header = ParseHeader(std::string(head_.begin() + 8, head_.end()), size);
        if (!header.ok()) return Named(header.error());
        header_ = std::move(header.value());
        head_.clear();
        inline_ranges_ = adapter::InlineTensorRanges(header_);
        phase_ = Phase::kInline;
        continue;
      }
      case Phase::kInline:
        // kohya's alphas: the bytes readers inspect while reading, concatenated in range order.
        while (inline_index_ < inline_ranges_.size() && inline_got_ == inline_ranges_[inline_index_].size()) {
          ++inline_index_;
          inline_got_ = 0;
        }
        if (inline_index_ < inline_ranges_.size()) {
          const adapter::ByteRange& r = inline_ranges_[inline_index_];
          return job::Step::Read(0, r.begin + inline_got_, r.end);
        }
        PB_RETURN_IF_ERROR(ReadAdapterNow());
        continue;
      case Phase::kPolicy:
        // No link out of IN_DIR; Translate applied the no-silent-loss rule: refused, or these warnings.
        if (options_.output)
          PB_RETURN_IF_ERROR(CheckInputLinks("translate", options_.output->inputs, options_.output->flags));
        phase_ = Phase::kOutput;
        if (!result_->warnings.empty()) return job::Step::Warning(result_->warnings);
        continue;
      case Phase::kOutput: {
        if (options_.dry_run) {
          phase_ = Phase::kDone;
          continue;
        }
        // The names described are the names written (the format table's, TranslateOutputNames).
        const std::vector<std::string> names = output_names();
        if (options_.output && options_.output->out) {
          const OutputRequest& out = *options_.output->out;
          if (!out.single_file && !out.failure && out.writes != names)
            return MakeError(ErrorCode::InvalidArgument, "the output was described with other names than it has");
          PB_ASSIGN_OR_RETURN(output_plan_,
                              PlanOutput("translate", options_.output->inputs, out, options_.output->flags));
        }
        phase_ = Phase::kTell;
        continue;
      }
      case Phase::kTell:
        // The plan is told before the work starts; the outcome line follows it.
        phase_ = Phase::kBegin;
        if (!options_.json && !options_.quiet) {
          plan_text_ = adapter::RenderTranslatePlanText(*result_, options_.to);
          return job::Step::Message(plan_text_);
        }
        continue;
      case Phase::kBegin:
        // Tensor by tensor, each one's bytes read as it is written. Progress counts the adapter's tensor bytes
        // read for the output, of its weights file's size (the work completes short of it: the header was read
        // before); its line starts before the first byte.
        emitter_ = adapter::MakeWeightsEmitter(result_->output, written_);
        consumer_ = emitter_.get();
        PB_RETURN_IF_ERROR(emitter_->Begin());
        phase_ = Phase::kServe;
        return job::Step::Progress(0, 0, size);
      case Phase::kServe: {
        if (serve_index_ == serving_.size()) {
          serving_.assign(consumer_->adapter_needs().begin(), consumer_->adapter_needs().end());
          serve_index_ = 0;
          if (serving_.empty()) {
            phase_ = options_.info ? Phase::kDone : Phase::kFinish;
            continue;
          }
          serve_pos_ = serving_.front().begin;
        }
        const adapter::ByteRange& r = serving_[serve_index_];
        if (serve_pos_ >= r.end) {
          if (++serve_index_ < serving_.size()) serve_pos_ = serving_[serve_index_].begin;
          continue;
        }
        return job::Step::Read(0, serve_pos_, serve_pos_ + std::min(kAdapterReadPiece, r.end - serve_pos_));
      }
      case Phase::kFinish:
        PB_RETURN_IF_ERROR(emitter_->Finish());
        phase_ = Phase::kConfig;
        continue;
      case Phase::kConfig: {
        phase_ = Phase::kDone;
        const adapter::AdapterOutput& output = result_->output;
        if (!output.config_name) continue;
        return job::Step::Write(
            1, 0, std::span(reinterpret_cast<const uint8_t*>(output.config_text.data()), output.config_text.size()));
      }
      case Phase::kDone:
        if (options_.info) {
          read_->delta_norms = norms_->norms();
          summary_ = options_.json ? adapter::RenderAdapterInfoJson(*read_) : adapter::RenderAdapterInfoText(*read_);
        } else {
          // A dry run's plan is all it prints; a translation's plan was told before the work.
          summary_ = options_.json      ? adapter::RenderTranslateJson(*result_, options_.to, options_.dry_run)
                     : options_.quiet   ? ""
                     : options_.dry_run ? adapter::RenderTranslateText(*result_, options_.to, true)
                                        : adapter::RenderTranslateOutcomeText(*result_);
        }
        return job::Step{};
    }
  }
}

Status TranslateJob::SupplyHeader(std::span<const uint8_t> bytes) {
  if (phase_ == Phase::kConfigs) {
    (text_input_ == 1 ? config_ : base_config_)->append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } else if (phase_ == Phase::kInline) {
    inline_.insert(inline_.end(), bytes.begin(), bytes.end());
    inline_got_ += bytes.size();
  } else {
    head_.insert(head_.end(), bytes.begin(), bytes.end());
  }
  return Status::Ok();
}

Status TranslateJob::Accept(std::span<const uint8_t> bytes) {
  if (written_out_) {
    written_.bytes.clear();
    written_out_ = false;
  }
  if (bytes.empty()) {
    // The file is shorter than its size said (it changed while it was read).
    if (phase_ == Phase::kConfigs)
      return Fail(MakeError(
          ErrorCode::IoError,
          std::string(text_input_ == 1 ? "the adapter's config" : "the base config") + " ended before its size"));
    // The byte the read asked for started at: inline tensors are read at their ranges, after the header was parsed.
    const uint64_t at = phase_ == Phase::kServe    ? serve_pos_
                        : phase_ == Phase::kInline ? inline_ranges_[inline_index_].begin + inline_got_
                                                   : head_.size();
    return Fail(
        MakeError(ErrorCode::IoError, "`" + options_.weights_name + "` ended before byte " + std::to_string(at + 1)));
  }
  if (phase_ != Phase::kServe) return SupplyHeader(bytes);
  if (Status s = consumer_->SupplyAdapter(bytes); !s.ok()) return Fail(s.error());
  serve_pos_ += bytes.size();
  supplied_ += bytes.size();
  progress_pending_ = !options_.info;
  return Status::Ok();
}

}  // namespace pb::app
