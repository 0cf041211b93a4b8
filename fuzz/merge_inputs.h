// Pieces the merge targets (fuzz_merge_plan, fuzz_merge_engine) share to synthesise a base model and a PEFT
// adapter: shapes, sizes, the naming tables' {N} templates, and a sink that keeps what it is given.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/writer.h"

namespace pb::fuzz {

inline uint64_t Elements(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

inline uint64_t ByteLength(Dtype dtype, const std::vector<uint64_t>& shape) {
  return DtypeBits(dtype) * Elements(shape) / 8;
}

// A naming table's template with its layer filled in ("layers.{N}.q_proj", 1 -> "layers.1.q_proj").
inline std::string Filled(std::string tmpl, uint64_t layer) {
  size_t at = tmpl.find("{N}");
  if (at != std::string::npos) tmpl.replace(at, 3, std::to_string(layer));
  return tmpl;
}

struct VectorSink final : ByteSink {
  std::vector<uint8_t> bytes;
  Status Write(std::span<const uint8_t> b) override {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return Status::Ok();
  }
};

}  // namespace pb::fuzz
