#include "compose/dense_svd.h"

#include <algorithm>

#include "linalg/seeded_random.h"
#include "linalg/qr.h"

namespace pb::compose {
namespace {

constexpr size_t kOversample = 10;
constexpr int kPowerIterations = 4;

linalg::Svd Leading(linalg::Svd s, size_t k) {
  k = std::min(k, s.s.size());
  linalg::Svd out{linalg::Matrix(s.u.rows(), k),
                  std::vector<double>(s.s.begin(), s.s.begin() + static_cast<ptrdiff_t>(k)),
                  linalg::Matrix(s.v.rows(), k)};
  for (size_t i = 0; i < s.u.rows(); ++i)
    for (size_t j = 0; j < k; ++j) out.u(i, j) = s.u(i, j);
  for (size_t i = 0; i < s.v.rows(); ++i)
    for (size_t j = 0; j < k; ++j) out.v(i, j) = s.v(i, j);
  return out;
}

}  // namespace

linalg::Svd TruncatedSvd(const linalg::Matrix& m, size_t rank, uint64_t seed) {
  const size_t small = std::min(m.rows(), m.cols());
  const size_t width = rank + kOversample;
  if (small <= kExactSvdLimit || width >= small) return Leading(linalg::JacobiSvd(m), rank);
  // Y = M·Ω, then (M·Mᵀ)^q·Y with QR between products; Q spans M's leading column space.
  linalg::Matrix omega(m.cols(), width);
  linalg::SeededRandom random(seed, {0x5344});
  for (double& x : omega.data()) x = 2 * random.Uniform() - 1;
  linalg::Matrix q = linalg::ThinQr(linalg::Multiply(m, omega)).q;
  for (int i = 0; i < kPowerIterations; ++i) {
    linalg::Matrix z = linalg::ThinQr(linalg::MultiplyTransposedLeft(m, q)).q;  // Mᵀ·Q: cols × width
    q = linalg::ThinQr(linalg::Multiply(m, z)).q;
  }
  // M ≈ Q·(Qᵀ·M), and the SVD of the small width × cols matrix Qᵀ·M carries over through Q.
  linalg::Svd small_svd = linalg::JacobiSvd(linalg::MultiplyTransposedLeft(q, m));
  small_svd.u = linalg::Multiply(q, small_svd.u);
  return Leading(std::move(small_svd), rank);
}

}  // namespace pb::compose
