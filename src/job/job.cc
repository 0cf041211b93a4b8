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

}  // namespace pb::job
