#include "core/error.h"

namespace pb {

namespace {
constexpr std::string_view kNames[] = {
#define PB_ERROR_CODE_NAME(name, what) #name,
    PB_ERROR_CODES(PB_ERROR_CODE_NAME)
#undef PB_ERROR_CODE_NAME
};
}  // namespace

std::string_view ErrorCodeName(ErrorCode code) {
  auto i = static_cast<size_t>(code);
  return i < std::size(kNames) ? kNames[i] : "Unknown";
}

std::span<const std::string_view> ErrorCodeNames() { return kNames; }

std::optional<ErrorCode> ErrorCodeFromName(std::string_view name) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (kNames[i] == name) return static_cast<ErrorCode>(i);
  return std::nullopt;
}

Error MakeError(ErrorCode code, std::string message, std::optional<std::string> tensor,
                std::optional<uint64_t> offset) {
  return Error{code, std::move(message), std::move(tensor), offset};
}

}  // namespace pb
