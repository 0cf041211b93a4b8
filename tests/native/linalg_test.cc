// linalg/: Householder QR and Jacobi SVD against matrices whose decomposition is known by construction.
#include <gtest/gtest.h>

#include "random_matrix.h"

#include <cmath>
#include <cstdint>

#include "linalg/qr.h"
#include "linalg/svd.h"

namespace pb::linalg {
namespace {

Matrix Random(size_t rows, size_t cols, uint64_t seed) { return testing::RandomMatrix(rows, cols, seed); }

double MaxAbsDiff(const Matrix& a, const Matrix& b) {
  double d = 0;
  for (size_t i = 0; i < a.data().size(); ++i) d = std::max(d, std::fabs(a.data()[i] - b.data()[i]));
  return d;
}

// max |qᵀq - I|.
double Orthogonality(const Matrix& q) {
  Matrix g = MultiplyTransposedLeft(q, q);
  double d = 0;
  for (size_t i = 0; i < g.rows(); ++i)
    for (size_t j = 0; j < g.cols(); ++j) d = std::max(d, std::fabs(g(i, j) - (i == j ? 1.0 : 0.0)));
  return d;
}

Matrix Reconstruct(const Svd& s) {
  Matrix us = s.u;
  for (size_t i = 0; i < us.rows(); ++i)
    for (size_t k = 0; k < us.cols(); ++k) us(i, k) *= s.s[k];
  return MultiplyTransposedRight(us, s.v);
}

TEST(Linalg, QrOfTallWideAndRankDeficientMatrices) {
  for (auto [m, n] : {std::pair<size_t, size_t>{50, 7}, {7, 50}, {16, 16}, {1, 5}, {5, 1}}) {
    Matrix a = Random(m, n, m * 100 + n);
    Qr qr = ThinQr(a);
    ASSERT_EQ(qr.q.rows(), m);
    ASSERT_EQ(qr.q.cols(), std::min(m, n));
    EXPECT_LT(MaxAbsDiff(Multiply(qr.q, qr.r), a), 1e-13) << m << "x" << n;
    EXPECT_LT(Orthogonality(qr.q), 1e-13) << m << "x" << n;
    for (size_t i = 0; i < qr.r.rows(); ++i)
      for (size_t j = 0; j < i && j < qr.r.cols(); ++j) EXPECT_EQ(qr.r(i, j), 0.0);
  }
  // A zero column and two equal columns: still q·r = a with orthonormal q.
  Matrix a = Random(20, 4, 9);
  for (size_t i = 0; i < 20; ++i) a(i, 1) = 0, a(i, 3) = a(i, 2);
  Qr qr = ThinQr(a);
  EXPECT_LT(MaxAbsDiff(Multiply(qr.q, qr.r), a), 1e-13);
  EXPECT_LT(Orthogonality(qr.q), 1e-13);
}

TEST(Linalg, BlockedRIsThinQrsRUpToRowSigns) {
  for (auto [m, n] : {std::pair<size_t, size_t>{3000, 40}, {1000, 7}, {600, 300}, {257, 1}}) {
    Matrix a = Random(m, n, m + n);
    Matrix full = ThinQr(a).r, blocked = QrR(a);
    ASSERT_EQ(blocked.rows(), full.rows());
    double d = 0;
    for (size_t i = 0; i < full.rows(); ++i) {
      const double sign = (full(i, i) >= 0) == (blocked(i, i) >= 0) ? 1.0 : -1.0;
      for (size_t j = 0; j < n; ++j) d = std::max(d, std::fabs(full(i, j) - sign * blocked(i, j)));
    }
    EXPECT_LT(d, 1e-11) << m << "x" << n;
  }
}

TEST(Linalg, JacobiSvdRecoversKnownSingularValues) {
  // a = U diag(s) Vᵀ with U, V orthonormal (from QR of random matrices) and s spread over 12 orders of magnitude.
  const size_t m = 40, n = 12;
  Matrix u = ThinQr(Random(m, n, 1)).q, v = ThinQr(Random(n, n, 2)).q;
  std::vector<double> s(n);
  for (size_t k = 0; k < n; ++k) s[k] = std::pow(10.0, 3.0 - static_cast<double>(k));
  Svd known{u, s, v};
  Matrix a = Reconstruct(known);
  for (const Matrix& input : {a, a.Transposed()}) {
    Svd got = JacobiSvd(input);
    ASSERT_EQ(got.s.size(), n);
    // Accurate to the rounding of `a` itself (a few ulps of its largest value), the small values included.
    for (size_t k = 0; k < n; ++k) EXPECT_NEAR(got.s[k], s[k], 1e-12 * s[0]) << k;
    EXPECT_LT(MaxAbsDiff(Reconstruct(got), input), 1e-12);
    EXPECT_LT(Orthogonality(got.u), 1e-12);
    EXPECT_LT(Orthogonality(got.v), 1e-12);
  }
}

TEST(Linalg, LowRankSvdOfAProductEqualsTheSvdOfTheProduct) {
  const size_t out = 64, in = 48, r = 10;
  Matrix b = Random(out, r, 3), a = Random(r, in, 4);
  for (size_t i = 0; i < out; ++i) b(i, 9) = 0.5 * b(i, 0);  // rank 9, not 10
  Svd low = LowRankSvd(b, a);
  Svd full = JacobiSvd(Multiply(b, a));
  ASSERT_EQ(low.s.size(), r);
  for (size_t k = 0; k < r; ++k) EXPECT_NEAR(low.s[k], full.s[k], 1e-10 * full.s[0]) << k;
  EXPECT_LT(low.s[9], 1e-12 * low.s[0]);
  EXPECT_LT(MaxAbsDiff(Reconstruct(low), Multiply(b, a)), 1e-12);
  EXPECT_LT(Orthogonality(low.u), 1e-12);
  // The same bits on a second run: the sweep order is fixed.
  Svd again = LowRankSvd(b, a);
  EXPECT_EQ(again.s, low.s);
  EXPECT_EQ(again.u.data(), low.u.data());
}

}  // namespace
}  // namespace pb::linalg
