#include "linalg/truncated_svd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "linalg/qr.h"
#include "linalg/seeded_random.h"
#include "linalg/svd.h"

namespace pb::linalg {
namespace {

// The products' register tile: R output rows × kLanes output columns held in registers while the reduction
// index runs over a block of kBlock (so the packed right-hand block stays in L2 and the tile's left-hand values
// in L1). The columns are padded to a multiple of kLanes with zeros, so every tile is full width; padded
// columns are computed and dropped. None of this changes an output element's sum, which runs over the
// reduction index in increasing order, from 0, whatever the tile or the vector width.
constexpr size_t kLanes = 8;
constexpr size_t kBlock = 256;

// Four doubles with element-wise IEEE arithmetic (GCC/clang vector extensions): one AVX register, two SSE2 or
// WASM SIMD128 registers. Written out because the compilers' own vectorizer turns the tile's reduction loop
// into shuffles instead of keeping the accumulators in registers.
typedef double Quad __attribute__((vector_size(32)));

// Inlined everywhere (into the AVX2 build of the tiles too), and Quads passed by reference only: the SSE2 and
// AVX calling conventions pass them differently.
#define PB_ALWAYS_INLINE inline __attribute__((always_inline))
PB_ALWAYS_INLINE void Load(Quad& v, const double* p) { std::memcpy(&v, p, sizeof v); }
PB_ALWAYS_INLINE void Store(double* p, const Quad& v) { std::memcpy(p, &v, sizeof v); }

size_t PaddedColumns(size_t l) { return (l + kLanes - 1) / kLanes * kLanes; }

// out[r][c] += Σ_t left[r·len + t] · right[t·kLanes + c] for r < R, c < kLanes, t in increasing order;
// `out` rows are `out_stride` apart.
template <size_t R>
PB_ALWAYS_INLINE void Tile(const double* left, const double* right, size_t len, double* out, size_t out_stride) {
  Quad acc[R][2];
  for (size_t r = 0; r < R; ++r) Load(acc[r][0], out + r * out_stride), Load(acc[r][1], out + r * out_stride + 4);
  for (size_t t = 0; t < len; ++t) {
    Quad b0, b1;
    Load(b0, right + t * kLanes), Load(b1, right + t * kLanes + 4);
    for (size_t r = 0; r < R; ++r) {
      const double x = left[r * len + t];
      const Quad xs = {x, x, x, x};
      acc[r][0] += xs * b0;
      acc[r][1] += xs * b1;
    }
  }
  for (size_t r = 0; r < R; ++r) Store(out + r * out_stride, acc[r][0]), Store(out + r * out_stride + 4, acc[r][1]);
}

// Packs rows [start, start + len) of `m` (l columns) as chunks of kLanes columns: packed[(chunk·len + t)·kLanes
// + c] = m(start + t, chunk·kLanes + c), zero beyond column l.
void PackRows(const Matrix& m, size_t start, size_t len, std::vector<double>& packed) {
  const size_t l = m.cols(), chunks = PaddedColumns(l) / kLanes;
  packed.assign(chunks * len * kLanes, 0.0);
  for (size_t t = 0; t < len; ++t) {
    const double* row = m.row(start + t);
    for (size_t col = 0; col < l; ++col) packed[((col / kLanes) * len + t) * kLanes + col % kLanes] = row[col];
  }
}

// The left-hand side comes in blocks of kRows rows.
constexpr size_t kRows = 4;

// Runs the tiles of one block: `left` holds `rows` (≤ kRows) rows of length len, `packed` the right-hand
// block; `out` (padded to `lp` columns) gets those rows. R rows per tile: as many accumulators as registers.
template <size_t R>
PB_ALWAYS_INLINE void TilesOf(const double* left, size_t rows, const double* packed, size_t len, double* out,
                              size_t lp) {
  const size_t chunks = lp / kLanes;
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    const double* right = packed + chunk * len * kLanes;
    double* o = out + chunk * kLanes;
    size_t r = 0;
    for (; r + R <= rows; r += R) Tile<R>(left + r * len, right, len, o + r * lp, lp);
    for (; r < rows; ++r) Tile<1>(left + r * len, right, len, o + r * lp, lp);
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// 16 AVX registers hold a 4 × 8 tile (8 accumulators); AVX2 adds nothing to the doubles' arithmetic, and no
// FMA is enabled, so the products and sums are the same operations as the SSE2 build's.
__attribute__((target("avx2"))) void TilesAvx2(const double* left, size_t rows, const double* packed, size_t len,
                                               double* out, size_t lp) {
  TilesOf<4>(left, rows, packed, len, out, lp);
}
#endif

void Tiles(const double* left, size_t rows, const std::vector<double>& packed, size_t len, double* out, size_t lp) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return TilesAvx2(left, rows, packed.data(), len, out, lp);
#endif
  // 16 SSE2 (or WASM) registers hold a 2 × 8 tile.
  TilesOf<2>(left, rows, packed.data(), len, out, lp);
}

Matrix Unpad(const std::vector<double>& padded, size_t rows, size_t l) {
  const size_t lp = PaddedColumns(l);
  Matrix out(rows, l);
  for (size_t i = 0; i < rows; ++i)
    for (size_t c = 0; c < l; ++c) out(i, c) = padded[i * lp + c];
  return out;
}

// Σ a(i,j)² over the matrix: each row in four interleaved partial sums (as Dot), the rows in order with
// Neumaier's compensation, so 45 million terms lose no more than one row's rounding.
double SumOfSquares(const float* a, size_t m, size_t n, size_t stride) {
  double sum = 0, compensation = 0;
  for (size_t i = 0; i < m; ++i) {
    const float* row = a + i * stride;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const double x0 = row[j], x1 = row[j + 1], x2 = row[j + 2], x3 = row[j + 3];
      s0 += x0 * x0;
      s1 += x1 * x1;
      s2 += x2 * x2;
      s3 += x3 * x3;
    }
    for (; j < n; ++j) {
      const double x = row[j];
      s0 += x * x;
    }
    const double term = (s0 + s1) + (s2 + s3);
    const double next = sum + term;
    compensation += std::fabs(sum) >= std::fabs(term) ? (sum - next) + term : (term - next) + sum;
    sum = next;
  }
  return sum + compensation;
}

Matrix Identity(size_t n) {
  Matrix out(n, n);
  for (size_t i = 0; i < n; ++i) out(i, i) = 1;
  return out;
}

// The first k columns of a · b[:, :k].
Matrix MultiplyLeading(const Matrix& a, const Matrix& b, size_t k) {
  Matrix lead(b.rows(), k);
  for (size_t i = 0; i < b.rows(); ++i)
    for (size_t c = 0; c < k; ++c) lead(i, c) = b(i, c);
  return Multiply(a, lead);
}

double SumOfLeadingSquares(const std::vector<double>& s, size_t k) {
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += s[i] * s[i];
  return sum;
}

}  // namespace

Matrix MultiplyFloat(const float* a, size_t m, size_t n, size_t stride, const Matrix& q) {
  const size_t l = q.cols(), lp = PaddedColumns(l);
  std::vector<double> out(m * lp, 0.0), packed, left(kRows * kBlock);
  for (size_t j0 = 0; j0 < n; j0 += kBlock) {
    const size_t len = std::min(kBlock, n - j0);
    PackRows(q, j0, len, packed);
    for (size_t i0 = 0; i0 < m; i0 += kRows) {
      const size_t rows = std::min(kRows, m - i0);
      for (size_t r = 0; r < rows; ++r) {
        const float* row = a + (i0 + r) * stride + j0;
        for (size_t t = 0; t < len; ++t) left[r * len + t] = row[t];
      }
      Tiles(left.data(), rows, packed, len, out.data() + i0 * lp, lp);
    }
  }
  return Unpad(out, m, l);
}

Matrix MultiplyFloatTransposed(const float* a, size_t m, size_t n, size_t stride, const Matrix& y) {
  const size_t l = y.cols(), lp = PaddedColumns(l);
  std::vector<double> out(n * lp, 0.0), packed, left(kRows * kBlock);
  for (size_t i0 = 0; i0 < m; i0 += kBlock) {
    const size_t len = std::min(kBlock, m - i0);
    PackRows(y, i0, len, packed);
    for (size_t j0 = 0; j0 < n; j0 += kRows) {
      const size_t rows = std::min(kRows, n - j0);
      // Columns j0.. of the block's rows of a, transposed: these rows of aᵀ are the tile's left-hand side.
      for (size_t t = 0; t < len; ++t) {
        const float* row = a + (i0 + t) * stride + j0;
        for (size_t r = 0; r < rows; ++r) left[r * len + t] = row[r];
      }
      Tiles(left.data(), rows, packed, len, out.data() + j0 * lp, lp);
    }
  }
  return Unpad(out, n, l);
}

TruncatedSvd RandomizedTruncatedSvd(const float* a, size_t m, size_t n, size_t stride,
                                    const TruncatedSvdOptions& options) {
  const size_t p = std::min(m, n), k = std::min(options.rank, p);
  const size_t l = std::min(k + std::min(options.oversampling, p), p);
  TruncatedSvd out{Matrix(m, k), std::vector<double>(k, 0.0), Matrix(n, k), SumOfSquares(a, m, n, stride), 0, true, {}};
  if (!std::isfinite(out.frobenius_squared)) {
    std::fill(out.s.begin(), out.s.end(), std::numeric_limits<double>::quiet_NaN());
    out.converged = false;
    out.errors.push_back(std::sqrt(out.frobenius_squared));
    return out;
  }
  if (k == 0 || out.frobenius_squared == 0) {
    out.errors.push_back(std::sqrt(out.frobenius_squared));
    return out;
  }

  // The left basis q (m × l). When l spans the smaller side, take that side's identity: exact in one pass.
  const bool complete = l == p;
  Matrix q;
  if (complete && m <= n) {
    q = Identity(m);
  } else {
    Matrix omega(n, l);
    if (complete) {
      omega = Identity(n);
    } else {
      SeededRandom random(options.seed, {});
      for (double& e : omega.data()) e = random.Symmetric();
    }
    q = ThinQr(MultiplyFloat(a, m, n, stride, omega)).q;
  }

  // E's resolution in its square (see the header): a change below it is rounding, not convergence.
  const double noise =
      4 * std::sqrt(static_cast<double>(m + n)) * std::numeric_limits<double>::epsilon() * out.frobenius_squared;
  double previous_error2 = 0, previous_drop = 0;
  for (int iteration = 0;; ++iteration) {
    // a ≈ q·qᵀ·a = q·zᵀ = q·rzᵀ·qzᵀ, and rzᵀ = uc·diag(s)·vcᵀ.
    Qr z = ThinQr(MultiplyFloatTransposed(a, m, n, stride, q));
    Svd core = JacobiSvd(z.r.Transposed());
    const double error2 = std::max(0.0, out.frobenius_squared - SumOfLeadingSquares(core.s, k));
    out.errors.push_back(std::sqrt(error2));
    bool done = complete;
    if (!done && iteration > 0) {
      // |E_prev − E| ≤ tolerance·E, in squares: |E_prev² − E²| ≤ tolerance·E·(E_prev + E), plus the rounding.
      const double e = std::sqrt(error2), e_prev = std::sqrt(previous_error2);
      done = std::fabs(previous_error2 - error2) <= options.tolerance * e * (e_prev + e) + noise;
      // The decreases of E shrink geometrically once the slowest direction dominates: with ρ = drop / previous
      // drop, what E has still to fall is about drop·ρ / (1 − ρ). On a flat tail each iteration gains little
      // and the one-step test above would run to max_iterations for nothing.
      const double drop = e_prev - e;
      if (!done && options.tolerance > 0 && iteration > 1 && drop > 0 && previous_drop > drop) {
        const double rho = drop / previous_drop;
        done = drop * rho / (1 - rho) <= options.remaining_tolerance * e;
      }
      previous_drop = drop;
    }
    if (done || iteration >= options.max_iterations) {
      out.iterations = iteration;
      out.converged = done;
      out.u = MultiplyLeading(q, core.u, k);
      out.v = MultiplyLeading(z.q, core.v, k);
      for (size_t i = 0; i < k; ++i) {
        out.s[i] = core.s[i];
        if (core.s[i] != 0) continue;
        for (size_t r = 0; r < m; ++r) out.u(r, i) = 0;
        for (size_t r = 0; r < n; ++r) out.v(r, i) = 0;
      }
      return out;
    }
    previous_error2 = error2;
    q = ThinQr(MultiplyFloat(a, m, n, stride, z.q)).q;
  }
}

}  // namespace pb::linalg
