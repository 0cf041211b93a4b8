// Singular value decompositions for the adapter algebra:
//  - JacobiSvd: one-sided (Hestenes) Jacobi on a small dense matrix, accurate to the last bits of the small
//    singular values, deterministic (a fixed sweep order);
//  - LowRankSvd: the SVD of a product B·A (out × r, r × in) through QR of both factors, so the cost is
//    O((out + in)·r² + r³) and never depends on forming the out × in matrix.
#pragma once

#include <vector>

#include "linalg/matrix.h"

namespace pb::linalg {

struct Svd {
  Matrix u;               // m × k, orthonormal columns (a column whose singular value is 0 is 0)
  std::vector<double> s;  // k values, descending
  Matrix v;               // n × k, orthonormal columns
};

// a = u · diag(s) · vᵀ with k = min(m, n).
Svd JacobiSvd(const Matrix& a);

// b · a = u · diag(s) · vᵀ with k = min(out, in, r): `b` is out × r, `a` is r × in.
Svd LowRankSvd(const Matrix& b, const Matrix& a);

}  // namespace pb::linalg
