#include "cli/job_runner.h"

#include <algorithm>
#include <cstdio>

#include "cli/text_output.h"

namespace pb::cli {

Result<AtomicOutputFile*> TransactionOutputs::Open(size_t output) {
  if (output >= names_.size()) return MakeError(ErrorCode::InvalidArgument, "the job wrote to an output it has not");
  if (!transaction_) {
    PB_ASSIGN_OR_RETURN(transaction_, begin_());
  }
  files_.resize(names_.size(), nullptr);
  if (!files_[output]) {
    PB_ASSIGN_OR_RETURN(files_[output], transaction_->Add(names_[output]));
  }
  return files_[output];
}

Status TransactionOutputs::Commit() {
  if (!transaction_) {
    if (names_.empty()) return Status::Ok();
    return MakeError(ErrorCode::InvalidArgument, "the job finished without writing its output");
  }
  return transaction_->Commit();
}

namespace {

Status Execute(job::Job& job, std::span<const JobInput> inputs, JobOutputs& outputs, StderrProgress& progress,
               std::optional<size_t>& shown) {  // the input the progress line names
  std::vector<uint8_t> buffer;
  auto input = [&](size_t i) -> Result<const JobInput*> {
    if (i >= inputs.size()) return MakeError(ErrorCode::InvalidArgument, "the job read an input it has not");
    return &inputs[i];
  };
  for (;;) {
    PB_ASSIGN_OR_RETURN(job::Step step, job.Next());
    switch (step.kind) {
      case job::StepKind::kReadHeader:
      case job::StepKind::kRead: {
        PB_ASSIGN_OR_RETURN(const JobInput* in, input(step.input));
        // A file's end cuts the read short; past it the job is told the input ended.
        const uint64_t end = std::min(step.end, in->file ? in->file->size() : in->bytes.size());
        const size_t n = step.begin < end ? static_cast<size_t>(end - step.begin) : 0;
        if (!in->file) {
          PB_RETURN_IF_ERROR(job.Supply(n > 0 ? in->bytes.subspan(step.begin, n) : std::span<const uint8_t>()));
          break;
        }
        if (buffer.size() < n) buffer.resize(n);
        PB_RETURN_IF_ERROR(in->file->ReadAt(step.begin, std::span<uint8_t>(buffer.data(), n)));
        PB_RETURN_IF_ERROR(job.Supply(std::span<const uint8_t>(buffer.data(), n)));
        break;
      }
      case job::StepKind::kForward: {
        PB_ASSIGN_OR_RETURN(const JobInput* in, input(step.input));
        PB_ASSIGN_OR_RETURN(AtomicOutputFile * out, outputs.Open(step.output));
        if (!in->file) {
          if (step.begin > step.end || step.end > in->bytes.size())
            return MakeError(ErrorCode::InvalidArgument, "the job forwarded bytes past its input's end");
          PB_RETURN_IF_ERROR(out->WriteRegionAt(step.at, in->bytes.subspan(step.begin, step.end - step.begin)));
          break;
        }
        PB_RETURN_IF_ERROR(out->CopyRegionFrom(*in->file, step.begin, step.at, step.end - step.begin));
        break;
      }
      case job::StepKind::kWrite: {
        PB_ASSIGN_OR_RETURN(AtomicOutputFile * out, outputs.Open(step.output));
        PB_RETURN_IF_ERROR(out->WriteRegionAt(step.at, step.bytes));
        break;
      }
      case job::StepKind::kMessage: {
        std::FILE* to = step.warning ? stderr : stdout;
        WriteText(to, std::string(step.text));
        std::fflush(to);
        break;
      }
      case job::StepKind::kProgress:
        if (shown != step.input && step.input < inputs.size()) {
          shown = step.input;
          progress.StartFile(inputs[step.input].name, 0);
        }
        progress.Update(step.done);
        break;
      case job::StepKind::kDone: return outputs.Commit();
    }
  }
}

}  // namespace

Status RunJob(job::Job& job, std::span<const JobInput> inputs, JobOutputs& outputs, StderrProgress& progress) {
  std::optional<size_t> shown;
  Status status = Execute(job, inputs, outputs, progress, shown);
  if (!status.ok()) {
    progress.Abandon();
    return status;
  }
  if (shown) progress.Finish();  // a job that reported no progress (a dry run) shows no line
  return Status::Ok();
}

}  // namespace pb::cli
