// One module's combination, in float64: the maths of PEFT's add_weighted_adapter per method (docs/combine.md,
// "What each method computes"), with peft-bridge's exact defaults, and the relative error of the result against the
// exact Σ cᵢ·Bᵢ·Aᵢ computed from rank-sized matrices (never the out × in delta).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compose/combine_options.h"
#include "core/dtype.h"
#include "core/result.h"
#include "linalg/matrix.h"

namespace pb::compose {

// One adapter's factors for a module: A (r × in), B (out × r), with its user weight and PEFT scaling.
struct Term {
  linalg::Matrix a, b;
  double weight = 1;
  double scaling = 1;
  Dtype dtype = Dtype::F32;  // the factors' dtype (PEFT computes cat in it; --peft-compat rounds to it)
  uint64_t adapter = 0;      // which input (for the random streams)
};

struct ModuleMath {
  CombineMethod method = CombineMethod::kCat;
  uint64_t rank = 0;  // the new factors' rank (zero-padded when the result has fewer)
  std::optional<double> density;
  MajoritySign majority_sign = MajoritySign::kTotal;
  std::optional<double> svd_clamp;
  bool peft_compat = false;
  uint64_t seed = 0;
  uint64_t module_index = 0;  // for the random streams
};

struct Combined {
  linalg::Matrix a;                   // rank × in
  linalg::Matrix b;                   // out × rank
  std::optional<double> kept_energy;  // SVD family: Σ kept σ² / Σ σ² of the matrix it decomposed
};

Result<Combined> CombineModule(const std::vector<Term>& terms, const ModuleMath& math);

// ‖runtime_scale·B·A − Σ cᵢ·Bᵢ·Aᵢ‖_F / ‖Σ cᵢ·Bᵢ·Aᵢ‖_F without forming either product: from rank-sized Gram
// matrices, with the differences formed directly when the result is the cat form (`cat_form`: B the inputs' B
// side by side, A their scaled A, both rounded), and from a QR of the stacked factors where Gram sums would
// cancel (errors below 1e-6). 0 when both are 0.
double RelativeError(const std::vector<Term>& terms, const linalg::Matrix& a, const linalg::Matrix& b,
                     double runtime_scale, bool cat_form);

}  // namespace pb::compose
