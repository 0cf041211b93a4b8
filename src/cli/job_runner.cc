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

class Executor {
 public:
  Executor(job::Job& job, std::span<const JobInput> inputs, JobOutputs& outputs, StderrProgress& progress)
      : job_(job), inputs_(inputs), outputs_(outputs), progress_(progress) {}

  Status Run() {
    for (;;) {
      PB_ASSIGN_OR_RETURN(job::Step step, job_.Next());
      switch (step.kind) {
        case job::StepKind::kReadHeader:
        case job::StepKind::kRead: {
          if (step.input >= inputs_.size())
            return MakeError(ErrorCode::InvalidArgument, "the job read an input it has not");
          PB_RETURN_IF_ERROR(inputs_[step.input].shard ? Stream(step) : Read(step));
          break;
        }
        case job::StepKind::kDone: return outputs_.Commit();
        default: PB_RETURN_IF_ERROR(Carry(step));
      }
    }
  }
  bool progressed() const { return progressed_; }

 private:
  Status Read(const job::Step& step) {
    const JobInput& in = inputs_[step.input];
    // A file's end cuts the read short; past it the job is told the input ended.
    const uint64_t end = std::min(step.end, in.file ? in.file->size() : in.bytes.size());
    const size_t n = step.begin < end ? static_cast<size_t>(end - step.begin) : 0;
    if (!in.file) return job_.Supply(n > 0 ? in.bytes.subspan(step.begin, n) : std::span<const uint8_t>());
    if (buffer_.size() < n) buffer_.resize(n);
    PB_RETURN_IF_ERROR(in.file->ReadAt(step.begin, std::span<uint8_t>(buffer_.data(), n)));
    return job_.Supply(std::span<const uint8_t>(buffer_.data(), n));
  }

  // One Stream over the range asked: each chunk is supplied as it comes, and between chunks the job's steps are
  // carried out until it asks for the rest (a remote shard is then one request per read, as before jobs).
  Status Stream(const job::Step& step) {
    uint64_t pos = step.begin, end = step.end;  // `end`: of the read being answered
    bool asked = true;                          // a read step waits for its bytes
    return inputs_[step.input].shard->Stream(step.begin, step.end, [&](std::span<const uint8_t> bytes) -> Status {
      while (!bytes.empty()) {
        while (!asked) {
          PB_ASSIGN_OR_RETURN(job::Step next, job_.Next());
          const bool read = next.kind == job::StepKind::kRead || next.kind == job::StepKind::kReadHeader;
          if (read && (next.input != step.input || next.begin != pos || next.end > step.end))
            return MakeError(ErrorCode::InvalidArgument, "the job asked for other bytes before the rest of a read");
          if (next.kind == job::StepKind::kDone)
            return MakeError(ErrorCode::InvalidArgument, "the job finished inside a read");
          if (read) {
            end = next.end;
            asked = true;
          } else {
            PB_RETURN_IF_ERROR(Carry(next));
          }
        }
        const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes.size(), end - pos));
        PB_RETURN_IF_ERROR(job_.Supply(bytes.first(n)));
        asked = false;
        pos += n;
        bytes = bytes.subspan(n);
      }
      return Status::Ok();
    });
  }

  // Every step but the reads and the end.
  Status Carry(const job::Step& step) {
    switch (step.kind) {
      case job::StepKind::kForward: {
        if (step.input >= inputs_.size() || inputs_[step.input].shard)
          return MakeError(ErrorCode::InvalidArgument, "the job forwarded from an input it cannot copy");
        const JobInput& in = inputs_[step.input];
        PB_ASSIGN_OR_RETURN(AtomicOutputFile * out, outputs_.Open(step.output));
        if (!in.file) {
          if (step.begin > step.end || step.end > in.bytes.size())
            return MakeError(ErrorCode::InvalidArgument, "the job forwarded bytes past its input's end");
          return out->WriteRegionAt(step.at, in.bytes.subspan(step.begin, step.end - step.begin));
        }
        return out->CopyRegionFrom(*in.file, step.begin, step.at, step.end - step.begin);
      }
      case job::StepKind::kWrite: {
        PB_ASSIGN_OR_RETURN(AtomicOutputFile * out, outputs_.Open(step.output));
        return out->WriteRegionAt(step.at, step.bytes);
      }
      case job::StepKind::kMessage: {
        std::FILE* to = step.warning ? stderr : stdout;
        WriteText(to, std::string(step.text));
        std::fflush(to);
        return Status::Ok();
      }
      case job::StepKind::kProgress:
        if (step.total != 0) progress_.SetTotal(step.total);
        if (shown_ != step.input && step.input < inputs_.size()) {
          // The first input's line starts at 0; a later one's where the work is.
          progress_.StartFile(inputs_[step.input].name, shown_ ? step.done : 0);
          shown_ = step.input;
        }
        progress_.Update(step.done);
        progressed_ = true;
        return Status::Ok();
      default: return MakeError(ErrorCode::InvalidArgument, "a job step out of place");
    }
  }

  job::Job& job_;
  std::span<const JobInput> inputs_;
  JobOutputs& outputs_;
  StderrProgress& progress_;
  std::vector<uint8_t> buffer_;
  std::optional<size_t> shown_;  // the input the progress line names
  bool progressed_ = false;
};

}  // namespace

Status RunJob(job::Job& job, std::span<const JobInput> inputs, JobOutputs& outputs, StderrProgress& progress) {
  Executor executor(job, inputs, outputs, progress);
  Status status = executor.Run();
  if (!status.ok()) {
    progress.Abandon();
    return status;
  }
  if (executor.progressed()) progress.Finish();
  return Status::Ok();
}

}  // namespace pb::cli
