#include "linalg/qr.h"

#include <algorithm>
#include <cmath>

namespace pb::linalg {

Qr ThinQr(const Matrix& a) {
  const size_t m = a.rows(), n = a.cols(), p = std::min(m, n);
  // Column-major working copy: a reflection walks down columns.
  std::vector<std::vector<double>> col(n, std::vector<double>(m));
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) col[j][i] = a(i, j);
  std::vector<std::vector<double>> v(p);  // the reflectors, v[k] over rows k..m-1, unit length (or empty)
  for (size_t k = 0; k < p; ++k) {
    std::vector<double>& x = col[k];
    double norm2 = 0;
    for (size_t i = k; i < m; ++i) norm2 += x[i] * x[i];
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
      std::vector<double>& c = col[j];
      double d = 0;
      for (size_t i = 0; i < h.size(); ++i) d += h[i] * c[k + i];
      d *= 2;
      for (size_t i = 0; i < h.size(); ++i) c[k + i] -= d * h[i];
    }
    v[k] = std::move(h);
  }
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
      std::vector<double>& c = qcol[j];
      double d = 0;
      for (size_t i = 0; i < h.size(); ++i) d += h[i] * c[k + i];
      d *= 2;
      for (size_t i = 0; i < h.size(); ++i) c[k + i] -= d * h[i];
    }
  }
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < p; ++j) out.q(i, j) = qcol[j][i];
  return out;
}

}  // namespace pb::linalg
