#include "core/dtype_vocabulary.h"

#include <cctype>
#include <string>

#include "core/utf8.h"

namespace pb {

std::optional<Dtype> ParseFloatDtypeName(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "bf16" || lower == "bfloat16") return Dtype::BF16;
  if (lower == "f16" || lower == "fp16" || lower == "float16" || lower == "half") return Dtype::F16;
  if (lower == "f32" || lower == "fp32" || lower == "float32" || lower == "float") return Dtype::F32;
  return std::nullopt;
}

Result<Dtype> ParseFloatDtypeOption(std::string_view name) {
  if (auto dtype = ParseFloatDtypeName(name)) return *dtype;
  return MakeError(ErrorCode::InvalidArgument,
                   "unknown dtype `" + ClipForMessage(name) + "` (expected bf16, f16 or f32)");
}

std::string_view FloatDtypeOptionName(Dtype dtype) {
  return dtype == Dtype::BF16 ? "bf16" : dtype == Dtype::F16 ? "f16" : "f32";
}

}  // namespace pb
