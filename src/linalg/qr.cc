#include "linalg/qr.h"

#include <algorithm>
#include <cmath>

namespace pb::linalg {

namespace {

// Householder reflections on `col` (n columns of length m, column-major), reducing it to upper trapezoidal form
// in place; returns the reflectors (v[k] over rows k..m-1, unit length, or empty where nothing was annihilated).
std::vector<std::vector<double>> Reduce(std::vector<std::vector<double>>& col, size_t m, size_t n) {
  const size_t p = std::min(m, n);
  std::vector<std::vector<double>> v(p);
  for (size_t k = 0; k < p; ++k) {
    std::vector<double>& x = col[k];
    const double norm2 = Dot(x.data() + k, x.data() + k, m - k);
    double below = norm2 - x[k] * x[k];
    if (below == 0) continue;  // nothing to annihilate
    const double norm = std::sqrt(norm2);
    const double alpha = x[k] > 0 ? -norm : norm;  // the sign that avoids cancellation
    std::vector<double> h(x.begin() + static_cast<ptrdiff_t>(k), x.end());
    h[0] -= alpha;
    double hn2 = below + h[0] * h[0];
    const double hn = std::sqrt(hn2);
    for (double& e : h) e /= hn;
    for (size_t j = k; j < n; ++j) {
      double* c = col[j].data() + k;
      SubtractScaled(c, h.data(), 2 * Dot(h.data(), c, h.size()), h.size());
    }
    v[k] = std::move(h);
  }
  return v;
}

}  // namespace

Qr ThinQr(const Matrix& a) {
  const size_t m = a.rows(), n = a.cols(), p = std::min(m, n);
  // Column-major working copy: a reflection walks down columns.
  std::vector<std::vector<double>> col(n, std::vector<double>(m));
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) col[j][i] = a(i, j);
  std::vector<std::vector<double>> v = Reduce(col, m, n);
  Qr out{Matrix(m, p), Matrix(p, n)};
  for (size_t i = 0; i < p; ++i)
    for (size_t j = i; j < n; ++j) out.r(i, j) = col[j][i];
  // q = H_0 · H_1 · … · H_{p-1} · I[:, :p], applied from the last reflector to the first.
  std::vector<std::vector<double>> qcol(p, std::vector<double>(m, 0.0));
  for (size_t j = 0; j < p; ++j) qcol[j][j] = 1;
  for (size_t k = p; k-- > 0;) {
    const std::vector<double>& h = v[k];
    if (h.empty()) continue;
    for (size_t j = 0; j < p; ++j) {
      double* c = qcol[j].data() + k;
      SubtractScaled(c, h.data(), 2 * Dot(h.data(), c, h.size()), h.size());
    }
  }
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < p; ++j) out.q(i, j) = qcol[j][i];
  return out;
}

Matrix QrR(const Matrix& a) {
  const size_t m = a.rows(), n = a.cols();
  const size_t block = std::max<size_t>(256, 2 * n);
  if (m <= block) return ThinQr(a).r;
  // r so far (k × n, k ≤ n) stacked over the next block of rows, reduced again.
  std::vector<std::vector<double>> r;  // column-major, r[j] of length k
  size_t k = 0;
  for (size_t start = 0; start < m; start += block) {
    const size_t rows = std::min(block, m - start), height = k + rows;
    std::vector<std::vector<double>> col(n, std::vector<double>(height));
    for (size_t j = 0; j < n; ++j) {
      for (size_t i = 0; i < k; ++i) col[j][i] = r[j][i];
      for (size_t i = 0; i < rows; ++i) col[j][k + i] = a(start + i, j);
    }
    Reduce(col, height, n);
    k = std::min(height, n);
    r.assign(n, std::vector<double>(k));
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < k && i <= j; ++i) r[j][i] = col[j][i];
  }
  Matrix out(k, n);
  for (size_t i = 0; i < k; ++i)
    for (size_t j = i; j < n; ++j) out(i, j) = r[j][i];
  return out;
}

}  // namespace pb::linalg
