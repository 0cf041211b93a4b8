// Serving LoRA modules to a runtime (the adapter cache, docs/adapter-cache.md), sans I/O: which adapter module a
// base module name means, the one byte range of the weights file that holds its A and B, the factors from those
// bytes converted to the dtype asked for, the exact `cat` composition of several adapters' factors (the same
// maths as `combine --method cat`, combine_math.h), and a delta applied to a base weight held in memory with the
// merge kernel (kernels/lowrank.h), so that one adapter at weight 1 gives the bytes `merge` writes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "adapter/adapter.h"
#include "core/dtype.h"
#include "core/result.h"

namespace pb::compose {

// The adapter's module a runtime names: the base module ("model.layers.3.self_attn.q_proj"), the base weight
// ("….q_proj.weight") or a PEFT key of it ("base_model.model.….q_proj.lora_A.weight"). InvalidArgument naming
// `label` when the adapter has no such module; UnsupportedAdapter for a module whose delta is not s·B·A (DoRA,
// lora_B.bias, a fused experts parameter).
Result<const adapter::LoraModule*> ServedModule(const adapter::Adapter& adapter, std::string_view name,
                                                std::string_view label);

// The one range of the weights file that covers the module's A and B (and what lies between them, if they are
// not adjacent): one Range request per module.
adapter::ByteRange ModuleSpan(const adapter::LoraModule& m);

// Bytes A and B take once converted to `dtype`.
uint64_t ServedBytes(const adapter::LoraModule& m, Dtype dtype);

// A module's factors, little-endian row-major: A [r, in…] and B [out, r…] (PEFT orientation, shapes as the adapter's).
struct ServedFactors {
  Dtype dtype = Dtype::F32;
  std::vector<uint8_t> a, b;
  std::vector<uint64_t> a_shape, b_shape;
};

// A and B from the bytes of ModuleSpan(m) (`span` starts at its begin), rearranged as the reader recorded
// (transposes, folded scales of other formats) and converted once to `dtype` (round to nearest even, as torch).
Result<ServedFactors> FactorsFromSpan(const adapter::LoraModule& m, std::span<const uint8_t> span, Dtype dtype);

// The bounds of one composition served per request (the adapter cache's compose() and composeAdapter(), the
// edge router's ?adapters=): without them a request naming an adapter a thousand times makes a factor of rank
// 1000·r, and the memory and the response grow with it. Defaults here; the cache's options (maxTerms, maxRank,
// maxComposeBytes) and the router's MAX_TERMS, MAX_RANK, MAX_RESPONSE_MB set them.
struct CompositionLimits {
  uint64_t max_terms = 16;          // adapters (terms) in one composition
  uint64_t max_rank = 1024;         // the composition's rank, Σrᵢ (a module's, and the adapter's padded rank)
  uint64_t max_bytes = 1ull << 30;  // one composed module's factors, and a composed adapter's weights file
};

// InvalidArgument when `terms` is 0 or above limits.max_terms (the request names too many adapters: checked
// before anything is read).
Status CheckCompositionTerms(uint64_t terms, const CompositionLimits& limits);

// CheckCompositionTerms, then LimitExceeded when `rank` is above limits.max_rank or `bytes` (what the composition
// produces: a module's factors, or the whole weights file) above limits.max_bytes. `what` names the output.
Status CheckComposition(uint64_t terms, uint64_t rank, uint64_t bytes, std::string_view what,
                        const CompositionLimits& limits);

// One adapter's part of a composition: its factors (any float dtype), the user's weight and its PEFT scaling.
struct ServedTerm {
  const ServedFactors* factors = nullptr;
  double weight = 1;
  double scaling = 1;
};

// The exact cat form: A = [c₁·A₁; c₂·A₂; …] (Σrᵢ × in), B = [B₁ B₂ …] (out × Σrᵢ), cᵢ = weightᵢ·scalingᵢ,
// computed in float64 and rounded once to `dtype`, so that B·A = Σ cᵢ·Bᵢ·Aᵢ up to that rounding: the bytes
// `combine --method cat --dtype` writes for the module when every input has it. Shapes must agree (ShapeMismatch).
// `rank` above Σrᵢ pads A's rows and B's columns with zeros at the end, as `combine` pads a module only some
// inputs have to the combined rank (0: Σrᵢ; below it: InvalidArgument).
// `limits` bound the terms, the rank and the result's bytes before any work (CheckComposition).
Result<ServedFactors> ComposeCat(const std::vector<ServedTerm>& terms, Dtype dtype, uint64_t rank = 0,
                                 const CompositionLimits& limits = {});

// How a base weight holds the delta: [out, in…] (Linear, Conv), [in, out] (transformers' Conv1D), or an
// embedding's [num, dim] (PEFT rounds an embedding's delta to the weight's dtype first).
enum class WeightLayout { kOutIn, kInOut, kEmbedding };

// The layout a weight of `shape` has for these factors: kEmbedding for an embedding module; kOutIn when the shape
// is [out, in…]; else kInOut ([in, out], Conv1D). A square Conv1D weight must be named kInOut by the caller.
WeightLayout AutoLayout(const ServedFactors& factors, bool embedding, const std::vector<uint64_t>& shape);

// w + Σ cᵢ·Bᵢ·Aᵢ (in the layout), rounded once to `out_dtype`, by the merge kernel: with one term the kernel runs
// exactly as `merge` runs it (fp32 factors, scale = fp32(c)), so one adapter at weight 1 gives merge's bytes; with
// several, each cᵢ is folded into its A in fp32 and the factors are concatenated. ShapeMismatch when the weight's
// shape does not fit the factors.
Result<std::vector<uint8_t>> ApplyTerms(const std::vector<ServedTerm>& terms, std::span<const uint8_t> weight,
                                        Dtype weight_dtype, const std::vector<uint64_t>& weight_shape, Dtype out_dtype,
                                        WeightLayout layout);

}  // namespace pb::compose
