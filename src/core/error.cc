#include "core/error.h"

namespace pb {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::HeaderTooSmall: return "HeaderTooSmall";
    case ErrorCode::HeaderTooLarge: return "HeaderTooLarge";
    case ErrorCode::InvalidHeaderLength: return "InvalidHeaderLength";
    case ErrorCode::InvalidHeader: return "InvalidHeader";
    case ErrorCode::InvalidHeaderDeserialization: return "InvalidHeaderDeserialization";
    case ErrorCode::InvalidOffset: return "InvalidOffset";
    case ErrorCode::ValidationOverflow: return "ValidationOverflow";
    case ErrorCode::MisalignedSlice: return "MisalignedSlice";
    case ErrorCode::TensorInvalidInfo: return "TensorInvalidInfo";
    case ErrorCode::MetadataIncompleteBuffer: return "MetadataIncompleteBuffer";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::UnsupportedDtype: return "UnsupportedDtype";
    case ErrorCode::IoError: return "IoError";
    case ErrorCode::InvalidConfig: return "InvalidConfig";
    case ErrorCode::UnsupportedAdapter: return "UnsupportedAdapter";
    case ErrorCode::UnresolvedTensor: return "UnresolvedTensor";
    case ErrorCode::ShapeMismatch: return "ShapeMismatch";
  }
  return "Unknown";
}

Error MakeError(ErrorCode code, std::string message, std::optional<std::string> tensor,
                std::optional<uint64_t> offset) {
  return Error{code, std::move(message), std::move(tensor), offset};
}

}  // namespace pb
