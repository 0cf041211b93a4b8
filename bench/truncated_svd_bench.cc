// The randomized truncated SVD (linalg/truncated_svd.h) on extract-sized matrices: one pass each way (a·q and
// aᵀ·y) for l = 26 and 138, and whole k = 16 and k = 128 decompositions, single-threaded, in CPU seconds.
//   cmake --build build/native --target pb_truncated_svd_bench && build/native/bench/pb_truncated_svd_bench
// A decomposition's matrix is a fine-tune-like delta: a rank-256 part with σᵢ ∝ 1/i plus uniform noise 1/100
// of its size, so the spectrum decays and then flattens (the adaptive stop has something to do).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string_view>
#include <vector>

#include "linalg/truncated_svd.h"

namespace {

using pb::linalg::Matrix;

uint64_t state = 0x243F6A8885A308D3ull;
double Uniform() {  // [-1, 1)
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;
  return static_cast<double>(state >> 11) / 4503599627370496.0 - 1.0;
}

std::vector<float> DeltaLike(size_t m, size_t n) {
  const size_t r = 256;
  std::vector<float> left(m * r), right(r * n);
  for (size_t i = 0; i < m; ++i)
    for (size_t c = 0; c < r; ++c) left[i * r + c] = static_cast<float>(Uniform() / double(c + 1));
  for (float& e : right) e = static_cast<float>(Uniform());
  std::vector<float> a(m * n);
  std::vector<float> row(n);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) row[j] = 0;
    for (size_t c = 0; c < r; ++c) {
      const float x = left[i * r + c];
      const float* b = right.data() + c * n;
      for (size_t j = 0; j < n; ++j) row[j] += x * b[j];
    }
    for (size_t j = 0; j < n; ++j) a[i * n + j] = row[j] + static_cast<float>(0.01 * Uniform());
  }
  return a;
}

// CPU time of this thread: the machine may be shared, and wall time would count the other processes' turns.
double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
double Seconds(double since) { return CpuSeconds() - since; }

Matrix RandomMatrix(size_t rows, size_t cols) {
  Matrix q(rows, cols);
  for (double& e : q.data()) e = Uniform();
  return q;
}

}  // namespace

int main(int argc, char** argv) {
  const bool passes_only = argc > 1 && std::string_view(argv[1]) == "passes";
  for (auto [m, n] : {std::pair<size_t, size_t>{4096, 4096}, {11008, 4096}}) {
    auto start = CpuSeconds();
    std::vector<float> a = DeltaLike(m, n);
    std::printf("%zu x %zu (generated in %.1f s)\n", m, n, Seconds(start));
    for (size_t l : {26, 138}) {
      Matrix q = RandomMatrix(n, l), y = RandomMatrix(m, l);
      const double flops = 2.0 * double(m) * double(n) * double(l);
      start = CpuSeconds();
      Matrix aq = pb::linalg::MultiplyFloat(a.data(), m, n, n, q);
      const double t1 = Seconds(start);
      start = CpuSeconds();
      Matrix aty = pb::linalg::MultiplyFloatTransposed(a.data(), m, n, n, y);
      const double t2 = Seconds(start);
      std::printf("  l = %3zu: a*q %.3f s (%.1f GFLOP/s), a^T*y %.3f s (%.1f GFLOP/s)  [%g %g]\n", l, t1,
                  flops / t1 * 1e-9, t2, flops / t2 * 1e-9, aq(0, 0), aty(0, 0));
    }
    if (passes_only) continue;
    for (size_t k : {16, 128}) {
      pb::linalg::TruncatedSvdOptions options;
      options.rank = k;
      start = CpuSeconds();
      pb::linalg::TruncatedSvd svd = pb::linalg::RandomizedTruncatedSvd(a.data(), m, n, n, options);
      const double t = Seconds(start);
      double kept = 0;
      for (double s : svd.s) kept += s * s;
      std::printf("  k = %3zu: %.2f s, %d iterations (%s), s[0] %.6g s[k-1] %.6g, relative error %.4g\n", k, t,
                  svd.iterations, svd.converged ? "converged" : "not converged", svd.s[0], svd.s[k - 1],
                  std::sqrt(std::max(0.0, svd.frobenius_squared - kept) / svd.frobenius_squared));
      std::printf("    relative error after each iteration:");
      for (double e : svd.errors) std::printf(" %.7g", e / std::sqrt(svd.frobenius_squared));
      std::printf("\n");
    }
  }
  return 0;
}
