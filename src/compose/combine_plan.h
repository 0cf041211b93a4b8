// `combine`'s plan, sans I/O: which modules the combined adapter has and from which inputs, its rank, dtype,
// tensors and adapter_config.json, checked before any tensor byte is read. Everything the method cannot express
// (DoRA, lora_bias, trainable tokens, ranks that differ where the method stacks factors elementwise, shapes that
// disagree, two architectures) is one error listing every module concerned.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "compose/combine_options.h"

namespace pb::compose {

// The most elements of one module's full delta the methods that prune it (ties_svd, dare_*_svd,
// magnitude_prune_svd) may form: 2²⁸ (LLaMA-70B's MLP is 2.35·10⁸), 2 GiB per float64 matrix.
inline constexpr uint64_t kMaxDenseElements = uint64_t{1} << 28;

struct CombineInput {
  std::string label;  // how messages name it (the argument as given)
  const adapter::Adapter* adapter = nullptr;
};

struct PlannedModule {
  std::string path;
  adapter::LoraShape shape = adapter::LoraShape::kLinear;
  std::vector<size_t> inputs;         // the inputs that have it, in input order
  std::vector<uint64_t> ranks;        // their ranks
  uint64_t rank = 0;                  // the combined factors' rank
  size_t a_tensor = 0, b_tensor = 0;  // indices into CombinePlan::output.weights.tensors
};

struct PlannedExtra {
  std::string key;             // the PEFT key without "base_model.model."
  std::vector<size_t> inputs;  // the inputs that have it
  size_t tensor = 0;           // index into output.weights.tensors
  // A base weight PEFT saves beside a LoRA-targeted embedding (save_embedding_layers: `…embed_tokens.base_layer
  // .weight`) or a saved embedding no modules_to_save names: PEFT loads it over the model's weight, it is not the
  // adapter's to weigh. Written unchanged (the first input's); the inputs' copies must be identical.
  bool base_copy = false;
};

struct CombinePlan {
  CombineOptions options;    // as resolved (weights filled, method after PEFT's one-adapter rule)
  uint64_t rank = 0;         // the config's r (= lora_alpha: runtime scaling 1)
  double runtime_scale = 1;  // what PEFT multiplies B·A by at run time (√r when --peft-compat inherits rsLoRA)
  Dtype dtype = Dtype::F32;
  std::vector<PlannedModule> modules;
  std::vector<PlannedExtra> extras;
  adapter::AdapterOutput output;   // the PEFT files: tensors (placeholders, computed when written), config text
  std::vector<std::string> notes;  // facts worth telling (a module in only some inputs, PEFT's behaviour kept)
};

Result<CombinePlan> PlanCombine(const std::vector<CombineInput>& inputs, const CombineOptions& options);

}  // namespace pb::compose
