// Low-rank merge kernels (Google Highway): the arithmetic of a LoRA merge on a block of rows of a base
// weight, with the dtype conversions fused in, so a merge reads each base byte once and writes each output
// byte once.
//
// Every row block computes, for i < rows, j < cols:
//     delta[i, j] = (sum over k = 0..rank-1, ascending, of left[i, k] * right[k, j])   fp32, no FMA
//     out[i, j]   = round_out( float(w[i, j]) + sign * (delta[i, j] * scale) )
// which is PEFT's default path: fp32 delta = (B @ A) * s, added in fp32, rounded once (RNE) to the output
// dtype. Products and sums are separately rounded fp32 operations (multiply, then add; never a fused
// multiply-add), in the same order on every target, so native and WASM (SIMD128 has no FMA) give
// identical bits. `left` is [rows, rank] and `right` [rank, cols], both fp32, row-major; callers arrange
// the factors per layer type (Linear: left = B rows, right = A; Conv1D and Embedding: left = A^T rows,
// right = B^T).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace pb::kernels {

struct LowRankFactors {
  const float* left;   // [rows, rank], row stride `rank`; points at the block's first row
  const float* right;  // [rank, cols], row stride `cols`
  size_t rank;
  float scale;        // PEFT's scaling s, already rounded to fp32
  float sign = 1.0f;  // +1 merge, -1 unmerge
};

// out = round_out(float(w) + sign * delta * scale) over `rows` x `cols` elements. `w` and `out` are
// row-major with `cols` elements per row; `in` and `out_dtype` are any of F32, F16, BF16, F64, F8_E4M3,
// F8_E5M2 (16-bit and 8-bit inputs are widened exactly; an F64 weight is first rounded to fp32; the result is
// rounded once). `out` may alias `w` only when both dtypes have the same width.
// Returns false for an unsupported dtype, or when a staging buffer (F64 / F8 sides) cannot be allocated: the
// kernels never abort; the caller tells the two apart (IsConvertibleFloat) and reports the error.
bool MergeRows(Dtype in, const void* w, Dtype out_dtype, void* out, size_t rows, size_t cols, const LowRankFactors& f);

// Embedding's rule (PEFT casts the delta to the weight's dtype first): out = round_out(float(w) +
// float(round_w(sign * delta * scale))), where round_w rounds to the weight dtype `in`.
bool MergeRowsRoundDeltaFirst(Dtype in, const void* w, Dtype out_dtype, void* out, size_t rows, size_t cols,
                              const LowRankFactors& f);

// v = float(w) + sign * delta * scale, kept in fp32 (DoRA needs the row norms before the final scaling).
bool MergeRowsF32(Dtype in, const void* w, float* v, size_t rows, size_t cols, const LowRankFactors& f);

// DoRA on rows (a Linear or Conv weight [out, in]: a norm per output row), evaluated in float64 end to end:
// v = double(float(w)) + sign * scale * Σ_k left_ik · right_kj, the factor magnitude_i / ‖v_i‖, then
// out = round_out(float(factor · v_ij)). PEFT evaluates the same in float32 (the delta, W + ΔW, torch's norm, the
// division, the product: five roundings); here only the last one or two remain, so the result is the float64
// reference's to within an ulp, at least as accurate as PEFT's. Returns false for an unsupported dtype.
bool DoraRowsF64(Dtype in, const void* w, Dtype out_dtype, void* out, size_t rows, size_t cols, const LowRankFactors& f,
                 const float* magnitude);

// Sum of squares of each row of v [rows, cols], accumulated in double (for DoRA's norms).
void RowSquaredNorms(const float* v, size_t rows, size_t cols, double* out);

// out[i, j] = round_out(v[i, j] * factor[i]) (per row) or * factor[j] (per column). False when a staging
// buffer (F64 / F8 output) cannot be allocated.
bool ScaleRowsTo(const float* v, size_t rows, size_t cols, const float* factor, bool per_column, Dtype out_dtype,
                 void* out);

// True when every element of v is finite (for --safe).
bool AllFinite(const float* v, size_t n);

// m [rows, cols] transposed to [cols, rows]: the factors of a weight stored [in, out] (Conv1D) or an embedding's,
// whose merge runs on Aᵀ and Bᵀ.
std::vector<float> Transposed(const std::vector<float>& m, size_t rows, size_t cols);

}  // namespace pb::kernels
