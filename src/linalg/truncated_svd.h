// The leading singular triplets of a large dense float32 matrix (extract's Δ = W_tuned − W_base, up to
// 32000 × 4096), by randomized subspace iteration (Halko, Martinsson and Tropp 2011, algorithm 4.4) with an
// orthonormal basis re-made by Householder QR after every product, and Rayleigh–Ritz at the end:
//   Q = qr(A·Ω);  repeat { Z = Aᵀ·Q = Qz·Rz;  Ritz values σ̃ = sv(Rzᵀ);  Q = qr(A·Qz) }
// where each product with A is one pass over it (the cost: 2·m·n·l flops). Iterations stop once the error of
// the rank-k result, E = sqrt(‖A‖²_F − Σ_{i≤k} σ̃ᵢ²), stops falling (see TruncatedSvdOptions::tolerance).
// As every routine in linalg/, only +, −, ×, ÷ and sqrt in a fixed order: the same bits natively and in WASM,
// for any vector width (each output element of a product is summed sequentially over its reduction index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "linalg/matrix.h"

namespace pb::linalg {

struct TruncatedSvdOptions {
  size_t rank = 0;           // k: the leading singular triplets wanted (clamped to min(m, n))
  size_t oversampling = 10;  // p: the subspace has l = min(k + p, min(m, n)) columns
  int max_iterations = 16;   // power (subspace) iterations at most, each two passes over A
  // Stop when E changed by less than tolerance·E over one iteration, or by less than E's own rounding (the
  // Ritz values are accurate to about √(m + n)·ε·‖A‖²_F in their squares, so E is not resolved below that).
  // 0 iterates until E changes by no more than that rounding.
  double tolerance = 1e-7;
  // Or when the fall of E still to come, extrapolated from the last two iterations' decreases (geometric, as
  // subspace iteration converges), is below remaining_tolerance·E: extract's 1e-4 target with a margin of 10.
  // tolerance = 0 turns both tests off (iterate until E's change is rounding).
  double remaining_tolerance = 1e-5;
  uint64_t seed = 0;  // the test matrix Ω: entries uniform in [−1, 1) from a SplitMix64 stream seeded by it
};

struct TruncatedSvd {
  Matrix u;                      // m × k, orthonormal columns (but see the zero values below)
  std::vector<double> s;         // k values, descending
  Matrix v;                      // n × k, orthonormal columns (idem)
  double frobenius_squared = 0;  // ‖A‖²_F: Σ of the squares (exact in double), summed in a fixed order
  int iterations = 0;            // power iterations done (0: the range finder alone was enough)
  bool converged = false;        // E settled (or the subspace is everything) before max_iterations ran out
  // E = sqrt(max(0, ‖A‖²_F − Σ_{i≤k} σ̃ᵢ²)) after the range finder and after each iteration (iterations + 1
  // values; one, ‖A‖_F, when k = 0 or A is zero or not finite): errors.back() is the Frobenius error of
  // u·diag(s)·vᵀ (to rounding), for extract's report.
  std::vector<double> errors;
};

// The rank-k truncated SVD of `a`: m rows × n columns, row-major float32 with row stride `stride` ≥ n; not
// modified. a ≈ u · diag(s) · vᵀ, with ‖a − u·diag(s)·vᵀ‖²_F = frobenius_squared − Σ s² up to rounding.
//  - When l = min(m, n) the subspace is the whole row or column space (Ω = I, or Q = I): the result is the
//    exact truncated SVD after one pass each way, iterations = 0.
//  - A triplet whose computed singular value is exactly 0 (always, for a zero matrix) has zero u and v columns.
//    Beyond an exact rank below k the values are rounding-level (about ε·s[0]), not 0, and their vectors are
//    orthonormal but arbitrary.
//  - Precondition: `a` is finite (extract refuses non-finite deltas first). On non-finite input the call still
//    returns at once: frobenius_squared is then non-finite (it is finite exactly when every entry is) and s
//    is all NaN, u and v zero.
TruncatedSvd RandomizedTruncatedSvd(const float* a, size_t m, size_t n, size_t stride,
                                    const TruncatedSvdOptions& options);

// The two passes over `a`, exposed for the benchmark and the tests: a · q (m × l, q is n × l) and aᵀ · y
// (n × l, y is m × l). Each output element is Σ over the reduction index in increasing order, from 0.
Matrix MultiplyFloat(const float* a, size_t m, size_t n, size_t stride, const Matrix& q);
Matrix MultiplyFloatTransposed(const float* a, size_t m, size_t n, size_t stride, const Matrix& y);

}  // namespace pb::linalg
