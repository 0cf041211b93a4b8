#include "kernels/quantize.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/convert.h"

namespace pb::kernels {

namespace {

bool IsScaleDtype(Dtype t) { return t == Dtype::BF16 || t == Dtype::F16 || t == Dtype::F32; }

// torch.finfo(t).eps: compressed-tensors' replacement for a zero scale.
float Eps(Dtype t) {
  switch (t) {
    case Dtype::BF16: return 0.0078125f;      // 2^-7
    case Dtype::F16: return 0.0009765625f;    // 2^-10
    default: return 1.1920928955078125e-07f;  // 2^-23
  }
}

// Rounds n fp32 values to dtype t (RNE, as torch) in place, through `narrow` (n * 2 bytes at least).
void RoundTo(Dtype t, float* v, size_t n, uint8_t* narrow) {
  if (t == Dtype::F32) return;
  ConvertElements(Dtype::F32, t, v, narrow, n);
  ConvertElements(t, Dtype::F32, narrow, v, n);
}

// torch's amax of |x| with NaN propagation (a NaN anywhere makes the result NaN). Branch-free, so the compiler
// vectorizes it (every lane's comparisons are exact, so any order gives the same maximum).
float AbsMax(const float* x, size_t n) {
  float m = 0.0f;  // min and max are extended to include 0
  bool nan = false;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    nan |= a != a;
    m = a > m ? a : m;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// clamp(v, lo, hi) as torch.clamp for a non-NaN v; NaN becomes 0 (see quantize.h).
inline float Clamp(float v, float lo, float hi) {
  const float c = v < lo ? lo : (v > hi ? hi : v);
  return v != v ? 0.0f : c;
}

// Round half to even for |v| <= 2^22, in IEEE arithmetic alone (no libm call, the same on every target): adding
// 1.5 * 2^23 leaves no fraction bits, so the sum is rounded to an integer by the current (nearest-even) mode.
inline float RoundHalfEven(float v) {
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
}

// Largest finite e4m3fn value and the symmetric divisor D = (qmax - qmin) / 2 of each type.
constexpr float kFp8Max = 448.0f;
float Divisor(QuantType type) {
  switch (type) {
    case QuantType::kFp8E4M3: return kFp8Max;
    case QuantType::kInt8: return 127.5f;
    default: return 7.5f;
  }
}

}  // namespace

int QuantBits(QuantType type) { return type == QuantType::kInt4 ? 4 : 8; }

bool QuantizeSymmetric(const float* x, size_t rows, size_t cols, size_t group, QuantType type, Dtype t, uint8_t* q,
                       uint8_t* scales) {
  if (!IsScaleDtype(t) || group == 0 || cols % group != 0) return false;
  const size_t groups = cols / group, scale_width = DtypeBits(t) / 8;
  std::vector<float> v(cols), s(groups);
  std::vector<uint8_t> narrow(cols * 2);
  const float divisor = Divisor(type);
  const float qmin = type == QuantType::kFp8E4M3 ? -kFp8Max : type == QuantType::kInt8 ? -128.0f : -8.0f;
  const float qmax = type == QuantType::kFp8E4M3 ? kFp8Max : type == QuantType::kInt8 ? 127.0f : 7.0f;
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    // Scales: fp32 division, rounded once to t; a zero scale becomes t's eps.
    for (size_t g = 0; g < groups; ++g) s[g] = AbsMax(row + g * group, group) / divisor;
    RoundTo(t, s.data(), groups, narrow.data());
    for (size_t g = 0; g < groups; ++g)
      if (s[g] == 0.0f) s[g] = Eps(t);
    ConvertElements(Dtype::F32, t, s.data(), scales + r * groups * scale_width, groups);
    // x / scale, computed as torch divides two t tensors (fp32, rounded to t).
    for (size_t g = 0; g < groups; ++g) {
      const float sg = s[g];
      const float* in = row + g * group;
      float* o = v.data() + g * group;
      for (size_t k = 0; k < group; ++k) o[k] = in[k] / sg;
    }
    RoundTo(t, v.data(), cols, narrow.data());
    uint8_t* out = q + r * cols;
    if (type == QuantType::kFp8E4M3) {
      for (size_t j = 0; j < cols; ++j) v[j] = Clamp(v[j], qmin, qmax);
      F32ToF8E4M3(v.data(), out, cols);
    } else {
      for (size_t j = 0; j < cols; ++j) v[j] = RoundHalfEven(Clamp(v[j], qmin, qmax));
      for (size_t j = 0; j < cols; ++j) out[j] = static_cast<uint8_t>(static_cast<int8_t>(v[j]));
    }
  }
  return true;
}

size_t PackedWords(size_t cols, int bits) { return (cols * static_cast<size_t>(bits) + 31) / 32; }

void PackInt32(const int8_t* q, size_t rows, size_t cols, int bits, uint8_t* out) {
  const size_t words = PackedWords(cols, bits), per_word = 32 / static_cast<size_t>(bits);
  const uint32_t offset = 1u << (bits - 1), mask = (bits == 32) ? ~0u : ((1u << bits) - 1);
  for (size_t r = 0; r < rows; ++r) {
    const int8_t* row = q + r * cols;
    for (size_t w = 0; w < words; ++w) {
      uint32_t word = 0;
      for (size_t k = 0; k < per_word; ++k) {
        const size_t j = w * per_word + k;
        if (j >= cols) break;
        const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(row[j]) + static_cast<int32_t>(offset)) & mask;
        word |= u << (k * static_cast<size_t>(bits));
      }
      uint8_t* o = out + (r * words + w) * 4;
      o[0] = static_cast<uint8_t>(word);
      o[1] = static_cast<uint8_t>(word >> 8);
      o[2] = static_cast<uint8_t>(word >> 16);
      o[3] = static_cast<uint8_t>(word >> 24);
    }
  }
}

bool QuantizeFp8Blocks(const float* x, size_t rows, size_t cols, size_t block_cols, uint8_t* q, float* inv_scales) {
  if (block_cols == 0 || cols % block_cols != 0) return false;
  const size_t blocks = cols / block_cols;
  std::vector<float> scale(blocks), v(cols);
  for (size_t b = 0; b < blocks; ++b) {
    float m = 0.0f;
    for (size_t r = 0; r < rows && !std::isnan(m); ++r) {
      const float a = AbsMax(x + r * cols + b * block_cols, block_cols);
      if (std::isnan(a) || a > m) m = a;
    }
    // scales = 448 / where(amax > 0, amax, 1); where(amax > 0, scales, 1); inv = 1 / scales, all fp32. A Python
    // float divided by a tensor is torch's __rtruediv__, `tensor.reciprocal() * 448`: two roundings, not one.
    const float s = m > 0.0f ? (1.0f / m) * kFp8Max : 1.0f;
    scale[b] = std::isnan(m) ? m : s;
    inv_scales[b] = 1.0f / scale[b];
  }
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    for (size_t b = 0; b < blocks; ++b) {
      const float sb = scale[b];
      for (size_t k = 0; k < block_cols; ++k)
        v[b * block_cols + k] = Clamp(row[b * block_cols + k] * sb, -kFp8Max, kFp8Max);
    }
    F32ToF8E4M3(v.data(), q + r * cols, cols);
  }
  return true;
}

void DequantizeSymmetric(const uint8_t* q, const float* scales, size_t rows, size_t cols, size_t group, QuantType type,
                         Dtype t, float* out) {
  const size_t groups = cols / group;
  std::vector<uint8_t> narrow(cols * 2);
  for (size_t r = 0; r < rows; ++r) {
    float* o = out + r * cols;
    const uint8_t* qr = q + r * cols;
    if (type == QuantType::kFp8E4M3) {
      F8E4M3ToF32(qr, o, cols);
    } else {
      for (size_t j = 0; j < cols; ++j) o[j] = static_cast<float>(static_cast<int8_t>(qr[j]));
    }
    for (size_t g = 0; g < groups; ++g) {
      const float sg = scales[r * groups + g];
      for (size_t k = 0; k < group; ++k) o[g * group + k] = o[g * group + k] * sg;
    }
    RoundTo(t, o, cols, narrow.data());
  }
}

}  // namespace pb::kernels
