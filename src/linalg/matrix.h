// A small dense float64 matrix for the adapter algebra (combine's recompression, extract's decompositions):
// row-major, owning its data. The sizes here are ranks (tens to hundreds) or one layer's rows × a rank, never a
// whole model. Every routine in linalg/ uses only +, −, ×, ÷ and sqrt in a fixed order, so results are the same
// bits natively and in WASM (IEEE-754 double, no FMA contraction in either build).
#pragma once

#include <cstddef>
#include <vector>

namespace pb::linalg {

class Matrix {
 public:
  Matrix() = default;
  Matrix(size_t rows, size_t cols) : rows_(rows), cols_(cols), data_(rows * cols, 0.0) {}

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  double& operator()(size_t r, size_t c) { return data_[r * cols_ + c]; }
  double operator()(size_t r, size_t c) const { return data_[r * cols_ + c]; }
  double* row(size_t r) { return data_.data() + r * cols_; }
  const double* row(size_t r) const { return data_.data() + r * cols_; }
  std::vector<double>& data() { return data_; }
  const std::vector<double>& data() const { return data_; }

  Matrix Transposed() const;

 private:
  size_t rows_ = 0, cols_ = 0;
  std::vector<double> data_;
};

// Σ x[i]·y[i] over n elements, summed in four interleaved partial sums ((s0 + s1) + (s2 + s3)): a fixed order
// that compilers can map to SIMD lanes without reassociating, so natively and in WASM give the same bits.
inline double Dot(const double* x, const double* y, size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i] * y[i];
    s1 += x[i + 1] * y[i + 1];
    s2 += x[i + 2] * y[i + 2];
    s3 += x[i + 3] * y[i + 3];
  }
  for (; i < n; ++i) s0 += x[i] * y[i];
  return (s0 + s1) + (s2 + s3);
}

// y[i] -= f·x[i] over n elements.
inline void SubtractScaled(double* y, const double* x, double f, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] -= f * x[i];
}

// a · b (a.cols() == b.rows()).
Matrix Multiply(const Matrix& a, const Matrix& b);
// aᵀ · b (a.rows() == b.rows()): the Gram-type products, without forming aᵀ.
Matrix MultiplyTransposedLeft(const Matrix& a, const Matrix& b);
// a · bᵀ (a.cols() == b.cols()).
Matrix MultiplyTransposedRight(const Matrix& a, const Matrix& b);
// Σ a(i,j)·b(i,j) (same shapes): the Frobenius inner product.
double FrobeniusDot(const Matrix& a, const Matrix& b);

}  // namespace pb::linalg
