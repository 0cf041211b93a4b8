// A deterministic pseudo-random matrix for the linear-algebra tests (linalg_test.cc, combine_test.cc).
#pragma once

#include <cstdint>

#include "linalg/matrix.h"

namespace pb::testing {

// rows × cols entries in [-1, 1), from an xorshift stream seeded by `seed`.
inline linalg::Matrix RandomMatrix(size_t rows, size_t cols, uint64_t seed) {
  linalg::Matrix m(rows, cols);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& e : m.data()) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    e = static_cast<double>(x >> 11) / 4503599627370496.0 - 1.0;
  }
  return m;
}

}  // namespace pb::testing
