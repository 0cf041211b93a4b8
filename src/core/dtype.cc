#include "core/dtype.h"

#include <array>

namespace pb {
namespace {

struct DtypeInfo {
  std::string_view name;
  uint32_t bits;
  bool floating;
};

constexpr std::array<DtypeInfo, kDtypeCount> kInfo = {{
    {"BOOL", 8, false},   {"F4", 4, true},          {"F6_E2M3", 6, true},     {"F6_E3M2", 6, true},
    {"U8", 8, false},     {"I8", 8, false},         {"F8_E5M2", 8, true},     {"F8_E4M3", 8, true},
    {"F8_E8M0", 8, true}, {"F8_E4M3FNUZ", 8, true}, {"F8_E5M2FNUZ", 8, true}, {"I16", 16, false},
    {"U16", 16, false},   {"F16", 16, true},        {"BF16", 16, true},       {"I32", 32, false},
    {"U32", 32, false},   {"F32", 32, true},        {"C64", 64, false},       {"F64", 64, true},
    {"I64", 64, false},   {"U64", 64, false},
}};

}  // namespace

uint32_t DtypeBits(Dtype dtype) { return kInfo[static_cast<size_t>(dtype)].bits; }

std::string_view DtypeName(Dtype dtype) { return kInfo[static_cast<size_t>(dtype)].name; }

std::optional<Dtype> ParseDtype(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    if (kInfo[i].name == name) return static_cast<Dtype>(i);
  }
  return std::nullopt;
}

bool IsFloatingPoint(Dtype dtype) { return kInfo[static_cast<size_t>(dtype)].floating; }

bool IsConvertibleFloat(Dtype dtype) {
  switch (dtype) {
    case Dtype::F16:
    case Dtype::BF16:
    case Dtype::F32:
    case Dtype::F64:
    case Dtype::F8_E4M3:
    case Dtype::F8_E5M2: return true;
    default: return false;
  }
}

}  // namespace pb
