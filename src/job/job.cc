#include "job/job.h"

namespace pb::job {

std::string_view StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kReadHeader: return "readHeader";
    case StepKind::kRead: return "read";
    case StepKind::kForward: return "forward";
    case StepKind::kWrite: return "write";
    case StepKind::kMessage: return "message";
    case StepKind::kProgress: return "progress";
    case StepKind::kDone: return "done";
  }
  return "done";
}

Result<Step> Job::Next() {
  if (error_) return *error_;
  auto step = Advance();
  if (!step.ok()) return Fail(step.error()).error();
  asked_read_ = step->kind == StepKind::kReadHeader || step->kind == StepKind::kRead;
  asked_ = asked_read_ ? step->end - step->begin : 0;
  return step;
}

Status Job::Supply(std::span<const uint8_t> bytes) {
  if (error_) return *error_;
  if (!asked_read_) return Fail(MakeError(ErrorCode::InvalidArgument, "Supply without a read step to answer"));
  if (bytes.size() > asked_)
    return Fail(MakeError(ErrorCode::InvalidArgument, "Supply gave more bytes than the read step asked for"));
  asked_read_ = false;
  Status status = Accept(bytes);
  if (!status.ok() && !error_) error_ = status.error();
  return status;
}

Status Job::Fail(Error error) {
  error_ = error;
  return error;
}

}  // namespace pb::job
