// The truncated SVD of a dense matrix, for the SVD methods that prune full deltas (ties_svd, dare_*_svd,
// magnitude_prune_svd: the pruning needs every element, so the delta is formed, one module at a time). Exact
// (one-sided Jacobi) when the smaller side is at most kExactSvdLimit; otherwise a randomized range finder
// (Halko, Martinsson & Tropp 2011, algorithm 4.4) with `rank` + 10 columns and 4 power iterations, each
// re-orthonormalized by QR, then the exact SVD of the projected matrix.
#pragma once

#include <cstdint>

#include "linalg/svd.h"

namespace pb::compose {

inline constexpr size_t kExactSvdLimit = 256;

// The leading `rank` singular triplets of `m` (fewer when min(rows, cols) is smaller); `seed` draws the range
// finder's test matrix.
linalg::Svd TruncatedSvd(const linalg::Matrix& m, size_t rank, uint64_t seed);

}  // namespace pb::compose
