// PEFT's LoRA on parameters (`target_parameters`, lora.ParamWrapper): transformers 5 fuses each MoE layer's
// experts into 3-D parameters (`mlp.experts.gate_up_proj` [E, 2·I, H], `mlp.experts.down_proj` [E, H, I]), and
// PEFT wraps each targeted parameter of a module in its own ParamWrapper. Wrappers on one module nest, so the
// saved keys carry no parameter name: the innermost wrapper's factors are `<module>.base_layer.lora_A.weight`,
// the next `<module>.lora_A.weight` (one `.base_layer` more per level). The innermost wraps the parameter the
// module registered first (tuners_utils._inject_parameters walks `named_parameters(recurse=False)`), which the
// adapter does not record: it is known here for transformers' fused experts, where every class registers
// gate_up_proj (or up_proj) before down_proj (all 72 experts classes of transformers 5.24).
//
// Layout (lora/layer.py ParamWrapper): A [r·E, in], B [out, r·E]; expert e's factors are A's rows e·r + k
// (`reshape(E, r, in)`) and B's columns k·E + e (`reshape(out, r, E)`). With the parameter stored
// [E, out, in] (is_transposed False: Mixtral, Qwen2/3-MoE...) delta_e = B_e·A_e; stored [E, in, out]
// (is_transposed True: gpt-oss) delta_e = (B_e·A_e)ᵀ. PEFT rounds the scaled delta to the parameter's dtype,
// then adds it (`param.data += delta.to(dtype)`); unmerge subtracts the same.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapter/lora_config.h"
#include "core/result.h"

namespace pb::adapter {

struct ExpertsTarget {
  std::string holder;          // the module holding the parameter: "model.layers.0.mlp.experts"
  std::string parameter;       // its name: "gate_up_proj"
  std::string parameter_path;  // holder.parameter: PEFT's key for rank_pattern / alpha_pattern, the base tensor
  uint32_t depth = 0;          // `.base_layer` levels in the keys: 0 is the outermost wrapper
  // Every parameter of `holder` that target_parameters names, in registration order (innermost first): the
  // nesting is right only if the base has each of them (the merge plan checks).
  std::vector<std::string> wrapped;
  uint64_t num_experts = 0;  // E = A's rows / r (set when the module is assembled)
};

// For the module part of a PEFT LoRA key (after "base_model.model.", before ".lora_A.weight"): nullopt when no
// target_parameters entry names a parameter of it (after stripping its `.base_layer` levels), or when only bare
// entries ("down_proj") do and the module is one target_modules wraps as a module; otherwise the
// parameter these factors belong to, or UnsupportedAdapter when the nesting cannot be resolved (parameters whose
// registration order is not known, more nesting levels than targeted parameters).
std::optional<Result<ExpertsTarget>> ParamWrapperOf(const LoraConfig& config, std::string_view key_module);

// Whether a transformers model_type stores its fused experts [E, in, out] (`is_transposed=True` in
// `use_experts_implementation`: gpt_oss, aria, openai_privacy_filter in transformers 5.24). Needed only when a
// parameter's two matrix dimensions are equal, where the shapes cannot tell.
bool ExpertsAreTransposed(std::string_view model_type);

// Why a format other than PEFT's cannot hold such factors (translate refuses them tensor by tensor).
std::string ExpertsNotHeldReason(std::string_view format, const ExpertsTarget& t);

}  // namespace pb::adapter
