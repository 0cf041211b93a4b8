// A float64 model of PEFT's merge maths (docs/peft-semantics.md) for the merge tests:
// exact rounding from double to each output dtype, the LoRA delta in double, the merged value of one weight
// element under each of PEFT's rounding rules, DoRA's norms, and a tally that compares the
// engine's output with the reference element by element (ulps for BF16/F16, a tolerance for F32).
//
// The reference computes in double and rounds once at each point where PEFT rounds; the engine computes in
// fp32 (as PEFT does), so the two may differ by the fp32 error: at most one ulp of a narrow dtype (rarely),
// a few fp32 ulps of the operands' magnitude for F32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/convert.h"

namespace pb::testing::merge_ref {

// --- Rounding and bit patterns ---------------------------------------------------------------------------

struct FloatFormat {
  int precision;     // significand bits, implicit bit included
  int min_exponent;  // exponent of the smallest normal number
  double max;        // largest finite value
};

inline FloatFormat FormatOf(Dtype d) {
  switch (d) {
    case Dtype::F16: return {11, -14, 65504.0};
    case Dtype::BF16: return {8, -126, std::ldexp(255.0, 120)};  // (2 - 2^-7) * 2^127
    case Dtype::F32: return {24, -126, static_cast<double>(std::numeric_limits<float>::max())};
    default: return {53, -1022, std::numeric_limits<double>::max()};
  }
}

// x rounded to the nearest value of `d`, ties to even, straight from double (going through float first
// would round twice). Subnormals are exact; beyond the largest finite value (by half an ulp or more): inf.
inline double RoundTo(double x, Dtype d) {
  if (d == Dtype::F64 || !std::isfinite(x) || x == 0.0) return x;
  const FloatFormat f = FormatOf(d);
  int e = 0;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e): its ulp in a p-bit format is 2^(e-p)
  const int quantum = std::max(e - f.precision, f.min_exponent - f.precision + 1);
  double r = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);  // scalings by 2^k are exact
  if (std::fabs(r) > f.max) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

inline size_t Width(Dtype d) { return DtypeBits(d) / 8; }

// Element i of a little-endian array of `d` (BF16, F16, F32 or F64), widened exactly.
inline double LoadAsDouble(Dtype d, const uint8_t* data, size_t i) {
  if (d == Dtype::F64) {
    double v;
    std::memcpy(&v, data + i * 8, 8);
    return v;
  }
  float f;
  kernels::ConvertElements(d, Dtype::F32, data + i * Width(d), &f, 1);
  return f;
}

inline std::vector<double> ToDoubles(Dtype d, std::span<const uint8_t> bytes) {
  const size_t n = bytes.size() / Width(d);
  std::vector<double> out(n);
  if (d == Dtype::F64) {
    std::memcpy(out.data(), bytes.data(), n * 8);
    return out;
  }
  std::vector<float> f(n);
  kernels::ConvertElements(d, Dtype::F32, bytes.data(), f.data(), n);
  for (size_t i = 0; i < n; ++i) out[i] = f[i];
  return out;
}

// A position on the number line of `d` for a value representable in `d`: consecutive values of the format
// are consecutive integers (both zeros are 0), so the difference of two positions counts ulps.
inline int64_t Position(double v, Dtype d) {
  uint64_t bits = 0, sign_bit = 0;
  if (d == Dtype::F64) {
    std::memcpy(&bits, &v, 8);
    sign_bit = uint64_t{1} << 63;
  } else {
    const float f = static_cast<float>(v);  // exact for a value of d
    uint8_t b[4] = {};
    kernels::ConvertElements(Dtype::F32, d, &f, b, 1);
    for (size_t i = 0; i < Width(d); ++i) bits |= static_cast<uint64_t>(b[i]) << (8 * i);
    sign_bit = uint64_t{1} << (8 * Width(d) - 1);
  }
  const int64_t magnitude = static_cast<int64_t>(bits & (sign_bit - 1));
  return (bits & sign_bit) ? -magnitude : magnitude;
}

inline int64_t UlpDistance(double a, double b, Dtype d) {
  const int64_t x = Position(a, d), y = Position(b, d);
  return x > y ? x - y : y - x;
}

// --- The LoRA delta in double ----------------------------------------------------------------------------

// PEFT's scaling as it meets an fp32 tensor: the Python double rounded to fp32 (docs/peft-semantics.md, "Scaling").
inline double TensorScale(double s) { return static_cast<double>(static_cast<float>(s)); }

// Factors in PEFT orientation: A [r, in] (in = A's columns: in_features, times the kernel size for a conv),
// B [out, r]. `scale` is what multiplies the product (use TensorScale). delta(o, i) = scale * sum_k B[o,k] A[k,i].
struct Factors {
  std::vector<double> a, b;
  size_t r = 0, in = 0, out = 0;
  double scale = 1.0;

  double Delta(size_t o, size_t i) const {
    double sum = 0.0;
    for (size_t k = 0; k < r; ++k) sum += b[o * r + k] * a[k * in + i];
    return scale * sum;
  }
  // scale * sum_k |B[o,k] A[k,i]|: the magnitude the fp32 rounding errors of the delta are relative to.
  double DeltaMagnitude(size_t o, size_t i) const {
    double sum = 0.0;
    for (size_t k = 0; k < r; ++k) sum += std::fabs(b[o * r + k] * a[k * in + i]);
    return std::fabs(scale) * sum;
  }
};

// How the stored base weight relates to [out, in]: as is (Linear, Conv viewed [out, in*k]) or transposed
// (transformers Conv1D [in, out]; Embedding [num, dim] with lora_embedding_A [r, num], B [dim, r]).
enum class Layout { kOutIn, kInOut };

// The delta at element (row, col) of the stored weight.
inline double DeltaAt(const Factors& f, Layout layout, size_t row, size_t col) {
  return layout == Layout::kOutIn ? f.Delta(row, col) : f.Delta(col, row);
}
inline double DeltaMagnitudeAt(const Factors& f, Layout layout, size_t row, size_t col) {
  return layout == Layout::kOutIn ? f.DeltaMagnitude(row, col) : f.DeltaMagnitude(col, row);
}

// --- PEFT's merged value of one element (docs/peft-semantics.md, "Rounding when the delta meets the weight") ---

// Linear / Conv1D / Conv, merge_and_unload(safe_merge=False): W += delta in place with an fp32 delta, i.e.
// fp32(W) + delta rounded once. `out` is the dtype written (the weight's own unless --dtype asks).
inline double MergedLinear(double w, double delta, Dtype out) { return RoundTo(w + delta, out); }

// Embedding (both paths) and PEFT's unmerge (every layer type): the delta is cast to the weight's dtype
// first (`delta.to(orig_dtype)`), then added (subtracted) and rounded again.
inline double MergedDeltaFirst(double w, double delta, Dtype weight_dtype, Dtype out) {
  return RoundTo(w + RoundTo(delta, weight_dtype), out);
}

// --- DoRA (docs/peft-semantics.md, "DoRA") ---------------------------------------------------------------

// W' = (m / ||W + delta||) * (W + delta), with the norm per row of the stored weight (Linear, Conv: one per
// output) or per column (Conv1D: [in, out]; Embedding: [num, dim]). Returns the unrounded values and, in
// `factor`, m / norm per row or column.
inline std::vector<double> DoraValues(const std::vector<double>& w, size_t rows, size_t cols, const Factors& f,
                                      Layout layout, const std::vector<double>& magnitude, bool per_column,
                                      std::vector<double>* factor = nullptr) {
  std::vector<double> v(rows * cols);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) v[i * cols + j] = w[i * cols + j] + DeltaAt(f, layout, i, j);
  std::vector<double> norms(per_column ? cols : rows, 0.0);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) norms[per_column ? j : i] += v[i * cols + j] * v[i * cols + j];
  std::vector<double> fac(norms.size());
  for (size_t k = 0; k < norms.size(); ++k) fac[k] = magnitude[k] / std::sqrt(norms[k]);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) v[i * cols + j] *= fac[per_column ? j : i];
  if (factor) *factor = std::move(fac);
  return v;
}

// --- Comparing the engine's output with the reference ----------------------------------------------------

// Counts, over a tensor, how the engine's values compare with PEFT's (the reference rounded to the output
// dtype): equal, one ulp away (BF16/F16) or within the tolerance (F32), or wrong.
class Tally {
 public:
  explicit Tally(Dtype out) : out_(out) {}

  // `expected` is the reference value already rounded to the output dtype; `tolerance` is the allowed
  // absolute difference for F32 outputs (narrow outputs allow one ulp).
  void Add(double got, double expected, double tolerance, const std::string& where) {
    ++total_;
    if (std::isnan(expected) || std::isnan(got)) {
      if (std::isnan(expected) && std::isnan(got)) ++exact_;
      else Bad(got, expected, where);
      return;
    }
    if (got == expected) {  // +0 and -0 count as equal
      ++exact_;
      return;
    }
    if (out_ == Dtype::F32 || out_ == Dtype::F64) {
      if (std::fabs(got - expected) <= tolerance) ++close_;
      else Bad(got, expected, where);
      return;
    }
    if (std::isfinite(got) && std::isfinite(expected) && UlpDistance(got, expected, out_) <= 1) ++close_;
    else Bad(got, expected, where);
  }

  size_t total() const { return total_; }
  size_t exact() const { return exact_; }
  size_t close() const { return close_; }
  size_t bad() const { return bad_; }
  double exact_fraction() const { return total_ ? static_cast<double>(exact_) / static_cast<double>(total_) : 1.0; }
  std::string Summary() const {
    std::string s = std::to_string(total_) + " elements: " + std::to_string(exact_) + " exact, " +
                    std::to_string(close_) + (out_ == Dtype::F32 ? " within tolerance, " : " one ulp off, ") +
                    std::to_string(bad_) + " wrong";
    if (!examples_.empty()) s += "; e.g. " + examples_;
    return s;
  }

 private:
  void Bad(double got, double expected, const std::string& where) {
    ++bad_;
    if (bad_ <= 4) {
      char buf[160];
      std::snprintf(buf, sizeof buf, " got %.9g expected %.9g", got, expected);
      examples_ += (examples_.empty() ? "" : ";") + where + buf;
    }
  }
  Dtype out_;
  size_t total_ = 0, exact_ = 0, close_ = 0, bad_ = 0;
  std::string examples_;
};

// The allowed F32 difference for a merged element: the fp32 delta of a rank-r product accumulated in order
// (r roundings), the scale, the addition and the final rounding, relative to the operands' magnitudes.
inline double F32Tolerance(double w, double delta_magnitude, size_t rank) {
  return static_cast<double>(rank + 4) * std::ldexp(1.0, -24) * (std::fabs(w) + delta_magnitude);
}

}  // namespace pb::testing::merge_ref
