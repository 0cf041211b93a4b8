#include "linalg/svd.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "linalg/qr.h"

namespace pb::linalg {
namespace {

constexpr int kMaxSweeps = 80;
constexpr double kTolerance = 1e-15;  // a pair is orthogonal when |aᵢ·aⱼ| ≤ tol·‖aᵢ‖·‖aⱼ‖

// One-sided Jacobi for m ≥ n: rotates the columns of `a` (given as the rows of `cols`, n rows of length m) until
// they are orthogonal; `vrows` (n × n, rows = V's columns) accumulates the rotations.
void Orthogonalize(std::vector<std::vector<double>>& cols, std::vector<std::vector<double>>& vrows) {
  const size_t n = cols.size();
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool rotated = false;
    for (size_t i = 0; i + 1 < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        std::vector<double>& ci = cols[i];
        std::vector<double>& cj = cols[j];
        const double alpha = Dot(ci.data(), ci.data(), ci.size()), beta = Dot(cj.data(), cj.data(), cj.size()),
                     gamma = Dot(ci.data(), cj.data(), ci.size());
        if (gamma == 0 || std::fabs(gamma) <= kTolerance * std::sqrt(alpha) * std::sqrt(beta)) continue;
        rotated = true;
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (size_t r = 0; r < ci.size(); ++r) {
          const double x = ci[r], y = cj[r];
          ci[r] = c * x - s * y;
          cj[r] = s * x + c * y;
        }
        std::vector<double>& vi = vrows[i];
        std::vector<double>& vj = vrows[j];
        for (size_t r = 0; r < vi.size(); ++r) {
          const double x = vi[r], y = vj[r];
          vi[r] = c * x - s * y;
          vj[r] = s * x + c * y;
        }
      }
    }
    if (!rotated) return;
  }
}

// The SVD of a (m ≥ n).
Svd TallSvd(const Matrix& a) {
  const size_t m = a.rows(), n = a.cols();
  std::vector<std::vector<double>> cols(n, std::vector<double>(m));
  for (size_t r = 0; r < m; ++r)
    for (size_t c = 0; c < n; ++c) cols[c][r] = a(r, c);
  std::vector<std::vector<double>> vrows(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) vrows[i][i] = 1;
  Orthogonalize(cols, vrows);
  std::vector<double> norms(n);
  for (size_t c = 0; c < n; ++c) norms[c] = std::sqrt(Dot(cols[c].data(), cols[c].data(), m));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return norms[x] > norms[y]; });
  Svd out{Matrix(m, n), std::vector<double>(n), Matrix(n, n)};
  for (size_t k = 0; k < n; ++k) {
    const size_t c = order[k];
    out.s[k] = norms[c];
    for (size_t r = 0; r < m; ++r) out.u(r, k) = norms[c] > 0 ? cols[c][r] / norms[c] : 0.0;
    for (size_t r = 0; r < n; ++r) out.v(r, k) = vrows[c][r];
  }
  return out;
}

}  // namespace

Svd JacobiSvd(const Matrix& a) {
  if (a.rows() >= a.cols()) return TallSvd(a);
  Svd t = TallSvd(a.Transposed());  // aᵀ = u' s v'ᵀ, so a = v' s u'ᵀ
  return Svd{std::move(t.v), std::move(t.s), std::move(t.u)};
}

Svd LowRankSvd(const Matrix& b, const Matrix& a) {
  // b = qb·rb and aᵀ = qa·ra, so b·a = qb·(rb·raᵀ)·qaᵀ: the SVD of the small core, carried out by qb and qa.
  Qr qb = ThinQr(b);
  Qr qa = ThinQr(a.Transposed());
  Svd core = JacobiSvd(MultiplyTransposedRight(qb.r, qa.r));
  return Svd{Multiply(qb.q, core.u), std::move(core.s), Multiply(qa.q, core.v)};
}

}  // namespace pb::linalg
