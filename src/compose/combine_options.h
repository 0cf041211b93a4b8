// What `combine` is asked to do: PEFT's add_weighted_adapter methods and their parameters, with peft-bridge's
// exact defaults (docs/combine.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace pb::compose {

enum class CombineMethod : uint8_t {
  kCat,                // exact: A stacked (weights and scalings folded in), B side by side; rank Σ rᵢ
  kLinear,             // exact (the cat form) unless peft_compat: then PEFT's A and B combined separately
  kSvd,                // the exact Σ cᵢ·Bᵢ·Aᵢ recompressed to `rank` by its SVD (through QR of the factors)
  kTies,               // PEFT's ties on A and B separately
  kTiesSvd,            // ties on the full deltas, then SVD
  kDareLinear,         // random pruning with rescale, then a weighted sum, on A and B separately
  kDareTies,           // random pruning with rescale, then ties, on A and B separately
  kDareLinearSvd,      // dare_linear on the full deltas, then SVD
  kDareTiesSvd,        // dare_ties on the full deltas, then SVD
  kMagnitudePrune,     // magnitude pruning, then a weighted sum, on A and B separately
  kMagnitudePruneSvd,  // magnitude_prune on the full deltas, then SVD
};

std::optional<CombineMethod> ParseCombineMethod(std::string_view name);
std::string_view CombineMethodName(CombineMethod method);
// The names, in the order the help lists them.
const std::vector<std::string_view>& CombineMethodNames();

// The SVD family: the result is recompressed to a rank.
bool IsSvdMethod(CombineMethod method);
// Methods that need a density (pruning).
bool NeedsDensity(CombineMethod method);
// Methods that draw random masks (DARE).
bool IsRandomMethod(CombineMethod method);
// Methods that elect a majority sign (TIES).
bool UsesMajoritySign(CombineMethod method);
// Methods PEFT applies to A and B separately (the factors must have equal ranks).
bool CombinesFactorsSeparately(CombineMethod method, bool peft_compat);

enum class MajoritySign : uint8_t { kTotal, kFrequency };

struct CombineOptions {
  CombineMethod method = CombineMethod::kCat;
  std::vector<double> weights;    // one per adapter (default 1 each)
  std::optional<uint64_t> rank;   // the SVD family's new rank (default: the largest input rank)
  std::optional<double> density;  // the fraction kept by pruning, in [0, 1]
  MajoritySign majority_sign = MajoritySign::kTotal;
  std::optional<double> svd_clamp;  // a quantile in [0, 1] of the new factors' values, clamped to ±it
  uint64_t seed = 0;                // DARE's masks
  bool peft_compat = false;         // PEFT's numbers and config, bugs included (docs/combine.md)
  std::optional<Dtype> dtype;       // output dtype (default: the first adapter's A dtype)
  bool allow_partial = false;       // combine the rest when an input has tensors no output holds (noted);
                                    // otherwise refused, as translate and merge refuse them
};

}  // namespace pb::compose
