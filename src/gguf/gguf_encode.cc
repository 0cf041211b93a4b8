#include "gguf/gguf_encode.h"

#include <cmath>
#include <cstring>

#include "kernels/convert.h"

namespace pb::gguf {

namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

bool IsNan(uint32_t bits) { return (bits & 0x7fffffffu) > 0x7f800000u; }

// numpy's npy_floatbits_to_halfbits for a NaN: the sign, the exponent all ones, the top 10 mantissa bits
// (never 0, so it stays a NaN).
uint16_t NumpyHalfNan(uint32_t bits) {
  uint16_t h = static_cast<uint16_t>(0x7c00u + ((bits & 0x007fffffu) >> 13));
  if (h == 0x7c00u) ++h;
  return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | h);
}

uint16_t Bf16(uint32_t n) {
  if (IsNan(n)) n = (n & 0xffff0000u) | (64u << 16);
  return static_cast<uint16_t>((static_cast<uint64_t>(n) + (0x7fffu + ((n >> 16) & 1u))) >> 16);
}

void PutU16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v & 0xff));
  out.push_back(static_cast<uint8_t>(v >> 8));
}

void EncodeQ8_0(std::span<const float> values, std::vector<uint8_t>& out) {
  for (size_t b = 0; b + 32 <= values.size(); b += 32) {
    const float* x = values.data() + b;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    uint16_t dh;
    kernels::F32ToF16(&d, &dh, 1);
    PutU16(out, dh);
    for (int i = 0; i < 32; ++i) {
      const float q = std::round(x[i] * id);  // half away from zero, as np_roundf and roundf
      out.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
    }
  }
}

}  // namespace

void EncodeValues(TensorType type, std::span<const float> values, std::vector<uint8_t>& out) {
  const size_t at = out.size();
  switch (type) {
    case TensorType::kF32:
      out.resize(at + values.size() * 4);
      std::memcpy(out.data() + at, values.data(), values.size() * 4);
      return;
    case TensorType::kF16: {
      out.resize(at + values.size() * 2);
      std::vector<uint16_t> halves(values.size());
      kernels::F32ToF16(values.data(), halves.data(), values.size());
      for (size_t i = 0; i < values.size(); ++i)
        if (uint32_t bits = Bits(values[i]); IsNan(bits)) halves[i] = NumpyHalfNan(bits);
      std::memcpy(out.data() + at, halves.data(), halves.size() * 2);
      return;
    }
    case TensorType::kBF16:
      out.reserve(at + values.size() * 2);
      for (float v : values) PutU16(out, Bf16(Bits(v)));
      return;
    case TensorType::kQ8_0:
      out.reserve(at + values.size() / 32 * 34);
      EncodeQ8_0(values, out);
      return;
  }
}

void DecodeValues(TensorType type, std::span<const uint8_t> bytes, float* out, uint64_t count) {
  switch (type) {
    case TensorType::kF32: std::memcpy(out, bytes.data(), count * 4); return;
    case TensorType::kF16: kernels::ConvertElements(Dtype::F16, Dtype::F32, bytes.data(), out, count); return;
    case TensorType::kBF16: kernels::ConvertElements(Dtype::BF16, Dtype::F32, bytes.data(), out, count); return;
    case TensorType::kQ8_0:
      for (uint64_t b = 0; b < count / 32; ++b) {
        const uint8_t* block = bytes.data() + b * 34;
        float d;
        kernels::ConvertElements(Dtype::F16, Dtype::F32, block, &d, 1);
        for (int i = 0; i < 32; ++i) out[b * 32 + i] = static_cast<float>(static_cast<int8_t>(block[2 + i])) * d;
      }
      return;
  }
}

}  // namespace pb::gguf
