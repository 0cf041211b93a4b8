// The 22 safetensors dtypes, in the reference's enum order (safetensors/src/tensor.rs `Dtype`).
// The order matters: the reference writer sorts tensors by this rank, descending.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pb {

enum class Dtype : uint8_t {
  BOOL,
  F4,
  F6_E2M3,
  F6_E3M2,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  F8_E4M3FNUZ,
  F8_E5M2FNUZ,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  C64,
  F64,
  I64,
  U64,
};
inline constexpr int kDtypeCount = 22;

// Bits per element (4 for F4, 6 for F6_*). Sizes are computed in bits, as the reference does.
uint32_t DtypeBits(Dtype dtype);
// The spelling used in headers, e.g. "F8_E4M3".
std::string_view DtypeName(Dtype dtype);
// Exact, case-sensitive match against the header spellings; no aliases.
std::optional<Dtype> ParseDtype(std::string_view name);
// Real floating-point formats that the conversion kernels handle (F16, BF16, F32, F64, F8_E4M3, F8_E5M2).
bool IsConvertibleFloat(Dtype dtype);
// Any floating-point storage type (includes F4/F6/F8 variants, C64 is complex and excluded).
bool IsFloatingPoint(Dtype dtype);

}  // namespace pb
