// Thin QR by Householder reflections: a = q · r with q (m × p) having orthonormal columns and r (p × n) upper
// trapezoidal, p = min(m, n). Used to reduce B·A products to their (rank × rank) core before an SVD.
#pragma once

#include "linalg/matrix.h"

namespace pb::linalg {

struct Qr {
  Matrix q;  // m × p
  Matrix r;  // p × n
};

// A column that is already zero below the diagonal gets no reflection (q's column is then the unit vector), so a
// rank-deficient `a` (a zero factor, duplicated rows) is decomposed without dividing by zero.
Qr ThinQr(const Matrix& a);

// Only r of ThinQr (up to the signs of its rows, which no norm or product rᵀr depends on), computed a block of
// rows at a time (TSQR: each block's rows reduced together with the r so far), so a tall matrix is read once and
// every reflection stays in cache. For norms of products of tall factors (compose's error report).
Matrix QrR(const Matrix& a);

}  // namespace pb::linalg
