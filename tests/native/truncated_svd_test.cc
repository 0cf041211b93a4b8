// linalg/truncated_svd: the randomized truncated SVD against JacobiSvd of the same (float32) matrix, over
// spectra that are easy (fast decay), hard (slow decay, a plateau across the cut) and degenerate (exact rank
// below k, zero), plus the two passes' bits against the plain sequential sums.
#include <gtest/gtest.h>

#include "random_matrix.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "linalg/qr.h"
#include "linalg/svd.h"
#include "linalg/truncated_svd.h"

namespace pb::linalg {
namespace {

// A float32 m × n matrix (row stride `stride`, the padding NaN so that reading it would show) whose singular
// values are `sigma` (as far as float32 rounding allows: the tests compare with the SVD of the rounded matrix).
struct FloatMatrix {
  size_t m, n, stride;
  std::vector<float> data;
  Matrix AsDouble() const {
    Matrix out(m, n);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) out(i, j) = data[i * stride + j];
    return out;
  }
};

FloatMatrix WithSpectrum(size_t m, size_t n, const std::vector<double>& sigma, uint64_t seed, size_t pad = 3) {
  const size_t r = sigma.size();
  Matrix u = ThinQr(testing::RandomMatrix(m, r, seed)).q, v = ThinQr(testing::RandomMatrix(n, r, seed + 1)).q;
  for (size_t i = 0; i < m; ++i)
    for (size_t c = 0; c < r; ++c) u(i, c) *= sigma[c];
  Matrix a = MultiplyTransposedRight(u, v);
  FloatMatrix out{m, n, n + pad, std::vector<float>(m * (n + pad), std::numeric_limits<float>::quiet_NaN())};
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) out.data[i * out.stride + j] = static_cast<float>(a(i, j));
  return out;
}

// An m × n float32 matrix of exact rank r: the product of two small-integer factors (entries in −2..2), so
// every entry is an exact float and the rank is not blurred by rounding.
FloatMatrix WithExactRank(size_t m, size_t n, size_t r, uint64_t seed) {
  Matrix b = testing::RandomMatrix(m, r, seed), c = testing::RandomMatrix(r, n, seed + 1);
  for (double& e : b.data()) e = std::floor(2.5 * e);
  for (double& e : c.data()) e = std::floor(2.5 * e);
  Matrix a = Multiply(b, c);
  FloatMatrix out{m, n, n, std::vector<float>(m * n)};
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) out.data[i * n + j] = static_cast<float>(a(i, j));
  return out;
}

std::vector<double> Spectrum(size_t count, const std::function<double(size_t)>& sigma_of_index) {
  std::vector<double> s(count);
  for (size_t i = 0; i < count; ++i) s[i] = sigma_of_index(i + 1);
  return s;
}

TruncatedSvd Decompose(const FloatMatrix& a, size_t k, uint64_t seed = 1, size_t oversampling = 10) {
  TruncatedSvdOptions options;
  options.rank = k;
  options.oversampling = oversampling;
  options.seed = seed;
  return RandomizedTruncatedSvd(a.data.data(), a.m, a.n, a.stride, options);
}

// ‖a − u·diag(s)·vᵀ‖_F from the factors themselves.
double ReconstructionError(const Matrix& a, const TruncatedSvd& t) {
  Matrix us = t.u;
  for (size_t i = 0; i < us.rows(); ++i)
    for (size_t c = 0; c < us.cols(); ++c) us(i, c) *= t.s[c];
  Matrix approx = us.cols() == 0 ? Matrix(a.rows(), a.cols()) : MultiplyTransposedRight(us, t.v);
  double sum = 0;
  for (size_t i = 0; i < a.data().size(); ++i) {
    const double d = a.data()[i] - approx.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum);
}

double OptimalError(const Svd& exact, size_t k) {
  double sum = 0;
  for (size_t i = k; i < exact.s.size(); ++i) sum += exact.s[i] * exact.s[i];
  return std::sqrt(sum);
}

double Orthogonality(const Matrix& q) {
  Matrix g = MultiplyTransposedLeft(q, q);
  double d = 0;
  for (size_t i = 0; i < g.rows(); ++i)
    for (size_t j = 0; j < g.cols(); ++j) d = std::max(d, std::fabs(g(i, j) - (i == j ? 1.0 : 0.0)));
  return d;
}

// The checks every case shares: shapes, the leading values within `value_tolerance`·σ₁ of the exact ones,
// orthonormal factors, frobenius_squared equal to Σσ², and the reconstruction error within 1e-4 of the optimal
// one, up to the resolution of the error estimate (E² is ‖a‖² − Σσ̃², resolved to about 1e-14·‖a‖²: the
// iterations stop there, see truncated_svd.h).
void ExpectNearOptimal(const FloatMatrix& a, size_t k, const TruncatedSvd& got, double value_tolerance) {
  const Matrix ad = a.AsDouble();
  const Svd exact = JacobiSvd(ad);
  ASSERT_EQ(got.u.rows(), a.m);
  ASSERT_EQ(got.u.cols(), k);
  ASSERT_EQ(got.v.rows(), a.n);
  ASSERT_EQ(got.v.cols(), k);
  ASSERT_EQ(got.s.size(), k);
  for (size_t i = 0; i < k; ++i) EXPECT_NEAR(got.s[i], exact.s[i], value_tolerance * exact.s[0]) << i;
  for (size_t i = 1; i < k; ++i) EXPECT_LE(got.s[i], got.s[i - 1]) << i;
  EXPECT_LT(Orthogonality(got.u), 1e-12);
  EXPECT_LT(Orthogonality(got.v), 1e-12);
  const double norm = std::sqrt(got.frobenius_squared);
  EXPECT_NEAR(got.frobenius_squared, OptimalError(exact, 0) * OptimalError(exact, 0), 1e-13 * got.frobenius_squared);
  const double optimal = OptimalError(exact, k), error = ReconstructionError(ad, got);
  EXPECT_LE(error * error, optimal * optimal * (1 + 2e-4) + 4e-14 * norm * norm) << "optimal " << optimal;
  EXPECT_GE(error, optimal * (1 - 1e-9));
  // The reported error is the factors' error, to the estimate's resolution; one value per iteration and one more.
  ASSERT_EQ(got.errors.size(), size_t(got.iterations) + 1);
  EXPECT_NEAR(got.errors.back() * got.errors.back(), error * error, 4e-14 * norm * norm);
}

TEST(TruncatedSvd, PassesSumEachElementSequentiallyOverTheReductionIndex) {
  // Sizes off every tile and block boundary (the reduction longer than one block), a padded row stride.
  const size_t m = 301, n = 263, stride = 270, l = 7;
  std::vector<float> a(m * stride, std::numeric_limits<float>::quiet_NaN());
  Matrix source = testing::RandomMatrix(m, n, 5);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) a[i * stride + j] = static_cast<float>(source(i, j));
  Matrix q = testing::RandomMatrix(n, l, 6), y = testing::RandomMatrix(m, l, 7);
  Matrix aq = MultiplyFloat(a.data(), m, n, stride, q), aty = MultiplyFloatTransposed(a.data(), m, n, stride, y);
  ASSERT_EQ(aq.rows(), m);
  ASSERT_EQ(aq.cols(), l);
  ASSERT_EQ(aty.rows(), n);
  ASSERT_EQ(aty.cols(), l);
  for (size_t c = 0; c < l; ++c) {
    for (size_t i = 0; i < m; ++i) {
      double sum = 0;
      for (size_t j = 0; j < n; ++j) sum += static_cast<double>(a[i * stride + j]) * q(j, c);
      ASSERT_EQ(aq(i, c), sum) << i << "," << c;
    }
    for (size_t j = 0; j < n; ++j) {
      double sum = 0;
      for (size_t i = 0; i < m; ++i) sum += static_cast<double>(a[i * stride + j]) * y(i, c);
      ASSERT_EQ(aty(j, c), sum) << j << "," << c;
    }
  }
}

TEST(TruncatedSvd, FastDecayIsExactToRoundingAndStopsEarly) {
  for (auto [m, n] : {std::pair<size_t, size_t>{60, 40}, {40, 60}, {200, 150}}) {
    const size_t k = 8;
    FloatMatrix a = WithSpectrum(m, n, Spectrum(std::min(m, n), [](size_t i) { return std::pow(0.5, i); }), m + n);
    TruncatedSvd got = Decompose(a, k);
    SCOPED_TRACE(::testing::PrintToString(m) + "x" + ::testing::PrintToString(n));
    ExpectNearOptimal(a, k, got, 1e-10);
    EXPECT_TRUE(got.converged);
    EXPECT_LE(got.iterations, 3);
  }
}

TEST(TruncatedSvd, SlowDecayReachesTheOptimalError) {
  for (auto [m, n] : {std::pair<size_t, size_t>{60, 40}, {40, 60}, {200, 150}}) {
    const size_t k = 10;
    FloatMatrix a =
        WithSpectrum(m, n, Spectrum(std::min(m, n), [](size_t i) { return 1 / std::sqrt(double(i)); }), 3 * m + n);
    TruncatedSvd got = Decompose(a, k);
    SCOPED_TRACE(::testing::PrintToString(m) + "x" + ::testing::PrintToString(n));
    // The iterations stop on the error (its extrapolated remaining fall below 1e-5·E), not on the values: those
    // next to the cut are then within 1e-4·σ₁, the error within 1e-4 of the optimum.
    ExpectNearOptimal(a, k, got, 1e-4);
  }
}

TEST(TruncatedSvd, IterationsBeyondTheErrorsConvergenceSharpenTheValues) {
  // Slow decay, tolerance 0: iterations go on until E changes by no more than its rounding, well after the
  // default tolerance stops, and the leading values get to JacobiSvd's to 1e-10.
  FloatMatrix a = WithSpectrum(200, 150, Spectrum(150, [](size_t i) { return 1 / std::sqrt(double(i)); }), 603);
  TruncatedSvdOptions options;
  options.rank = 10;
  options.tolerance = 0;
  options.max_iterations = 60;
  TruncatedSvd got = RandomizedTruncatedSvd(a.data.data(), a.m, a.n, a.stride, options);
  EXPECT_TRUE(got.converged);
  EXPECT_GT(got.iterations, Decompose(a, 10).iterations + 3);
  EXPECT_LT(got.iterations, 60);
  Svd exact = JacobiSvd(a.AsDouble());
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(got.s[i], exact.s[i], 1e-10 * exact.s[i]) << i;
}

TEST(TruncatedSvd, PlateauAcrossTheCut) {
  // σ_k and σ_{k+1} equal to 1e-6: which of the two the result takes is arbitrary, its error is not.
  for (auto [m, n] : {std::pair<size_t, size_t>{60, 40}, {40, 60}, {200, 150}}) {
    const size_t k = 6;
    FloatMatrix a = WithSpectrum(m, n,
                                 Spectrum(std::min(m, n),
                                          [k](size_t i) {
                                            if (i <= k - 2) return 4.0 / double(i);
                                            if (i <= k + 2) return 0.5 * (1 - 1e-6 * double(i - k + 2));
                                            return 0.3 * std::pow(0.8, double(i - k - 2));
                                          }),
                                 m * n);
    TruncatedSvd got = Decompose(a, k);
    SCOPED_TRACE(::testing::PrintToString(m) + "x" + ::testing::PrintToString(n));
    // The iterations stop on the error (its extrapolated remaining fall below 1e-5·E), not on the values: those
    // next to the cut are then within 1e-4·σ₁, the error within 1e-4 of the optimum.
    ExpectNearOptimal(a, k, got, 1e-4);
  }
}

TEST(TruncatedSvd, ExactRankBelowK) {
  for (auto [m, n] : {std::pair<size_t, size_t>{60, 40}, {40, 60}, {200, 150}}) {
    const size_t k = 12;
    FloatMatrix a = WithExactRank(m, n, 5, m + 7 * n);
    TruncatedSvd got = Decompose(a, k);
    SCOPED_TRACE(::testing::PrintToString(m) + "x" + ::testing::PrintToString(n));
    ExpectNearOptimal(a, k, got, 1e-12);
    EXPECT_TRUE(got.converged);
    EXPECT_LE(got.iterations, 1);
    for (size_t i = 5; i < k; ++i) EXPECT_LT(got.s[i], 1e-12 * got.s[0]) << i;
  }
}

TEST(TruncatedSvd, SubspaceSpanningTheSmallerSideIsExact) {
  // l = min(m, n): Ω (or Q) is the identity, one pass each way, the singular values those of JacobiSvd.
  for (auto [m, n] : {std::pair<size_t, size_t>{60, 12}, {12, 60}, {20, 20}}) {
    const size_t k = 8;
    FloatMatrix a = WithSpectrum(m, n, Spectrum(std::min(m, n), [](size_t i) { return 1 / std::sqrt(double(i)); }), m);
    TruncatedSvd got = Decompose(a, k, 3, 100);
    SCOPED_TRACE(::testing::PrintToString(m) + "x" + ::testing::PrintToString(n));
    ExpectNearOptimal(a, k, got, 1e-13);
    EXPECT_EQ(got.iterations, 0);
    EXPECT_TRUE(got.converged);
  }
  // Exact rank 3 of a 30 × 10, k = l = 10: exact, the values beyond the rank rounding-level.
  FloatMatrix a = WithExactRank(30, 10, 3, 8);
  TruncatedSvd got = Decompose(a, 10);
  ExpectNearOptimal(a, 10, got, 1e-13);
  for (size_t i = 3; i < 10; ++i) EXPECT_LT(got.s[i], 1e-13 * got.s[0]) << i;
}

TEST(TruncatedSvd, ZeroMatrix) {
  for (auto [m, n] : {std::pair<size_t, size_t>{30, 20}, {20, 30}}) {
    std::vector<float> a(m * n, 0.0f);
    TruncatedSvdOptions options;
    options.rank = 5;
    TruncatedSvd got = RandomizedTruncatedSvd(a.data(), m, n, n, options);
    EXPECT_EQ(got.frobenius_squared, 0.0);
    ASSERT_EQ(got.s.size(), 5u);
    ASSERT_EQ(got.u.rows(), m);
    ASSERT_EQ(got.v.rows(), n);
    for (double s : got.s) EXPECT_EQ(s, 0.0);
    EXPECT_EQ(got.errors, std::vector<double>{0.0});
    for (double e : got.u.data()) EXPECT_EQ(e, 0.0);
    for (double e : got.v.data()) EXPECT_EQ(e, 0.0);
  }
}

TEST(TruncatedSvd, NonFiniteInputIsFlaggedByTheNorm) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    FloatMatrix a = WithSpectrum(40, 30, Spectrum(30, [](size_t i) { return 1.0 / double(i); }), 2);
    a.data[17 * a.stride + 4] = bad;
    TruncatedSvd got = Decompose(a, 4);
    EXPECT_FALSE(std::isfinite(got.frobenius_squared));
    EXPECT_FALSE(got.converged);
    ASSERT_EQ(got.s.size(), 4u);
    for (double s : got.s) EXPECT_TRUE(std::isnan(s));
    ASSERT_EQ(got.errors.size(), 1u);
    EXPECT_FALSE(std::isfinite(got.errors[0]));
  }
}

TEST(TruncatedSvd, DeterministicForASeedAndNearOptimalForAnother) {
  FloatMatrix a = WithSpectrum(200, 150, Spectrum(150, [](size_t i) { return std::pow(double(i), -1.0); }), 11);
  TruncatedSvd first = Decompose(a, 16, 42), second = Decompose(a, 16, 42), other = Decompose(a, 16, 43);
  EXPECT_EQ(first.s, second.s);
  EXPECT_EQ(first.u.data(), second.u.data());
  EXPECT_EQ(first.v.data(), second.v.data());
  EXPECT_EQ(first.iterations, second.iterations);
  EXPECT_NE(first.u.data(), other.u.data());
  ExpectNearOptimal(a, 16, first, 1e-5);
  ExpectNearOptimal(a, 16, other, 1e-5);
}

TEST(TruncatedSvd, RankClampedToTheSmallerSide) {
  FloatMatrix a = WithSpectrum(9, 5, {3, 2, 1, 0.5, 0.25}, 4);
  TruncatedSvd got = Decompose(a, 50);
  ExpectNearOptimal(a, 5, got, 1e-13);
}

}  // namespace
}  // namespace pb::linalg
