#include "linalg/matrix.h"

namespace pb::linalg {

Matrix Matrix::Transposed() const {
  Matrix t(cols_, rows_);
  for (size_t r = 0; r < rows_; ++r)
    for (size_t c = 0; c < cols_; ++c) t(c, r) = (*this)(r, c);
  return t;
}

Matrix Multiply(const Matrix& a, const Matrix& b) {
  Matrix out(a.rows(), b.cols());
  for (size_t i = 0; i < a.rows(); ++i) {
    double* o = out.row(i);
    for (size_t k = 0; k < a.cols(); ++k) {
      const double x = a(i, k);
      const double* br = b.row(k);
      for (size_t j = 0; j < b.cols(); ++j) o[j] += x * br[j];
    }
  }
  return out;
}

Matrix MultiplyTransposedLeft(const Matrix& a, const Matrix& b) {
  Matrix out(a.cols(), b.cols());
  for (size_t k = 0; k < a.rows(); ++k) {
    const double* ar = a.row(k);
    const double* br = b.row(k);
    for (size_t i = 0; i < a.cols(); ++i) {
      const double x = ar[i];
      double* o = out.row(i);
      for (size_t j = 0; j < b.cols(); ++j) o[j] += x * br[j];
    }
  }
  return out;
}

Matrix MultiplyTransposedRight(const Matrix& a, const Matrix& b) {
  Matrix out(a.rows(), b.rows());
  for (size_t i = 0; i < a.rows(); ++i)
    for (size_t j = 0; j < b.rows(); ++j) {
      out(i, j) = Dot(a.row(i), b.row(j), a.cols());
    }
  return out;
}

double FrobeniusDot(const Matrix& a, const Matrix& b) { return Dot(a.data().data(), b.data().data(), a.data().size()); }

}  // namespace pb::linalg
