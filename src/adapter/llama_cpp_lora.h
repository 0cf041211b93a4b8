// llama.cpp's LoRA layout, whatever file holds it: what convert_lora_to_gguf.py makes of a PEFT adapter (tensor
// names from the architecture's naming table, B rows reordered where llama.cpp reorders the base weight,
// token_embd's A transposed, the scaling as one global adapter.lora.alpha). Written into a .gguf file
// (write_gguf.cc, the `gguf` format) or a safetensors file (write_gguf_names.cc, `gguf-names`). Not a public
// header.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "adapter/format_internal.h"

namespace pb::adapter::internal {

struct LlamaCppTensor {
  std::string name;  // "<gguf base tensor>.lora_a" / ".lora_b"
  Tensor tensor;     // held or a reference (rearrangement steps recorded)
};

struct LlamaCppLora {
  const ArchTable* arch = nullptr;
  std::vector<LlamaCppTensor> tensors;  // A then B per module, in the adapter's module order
  // One alpha every module shares (llama.cpp scales by alpha / rank per tensor); nullopt when PEFT's scaling
  // had to be folded into B (rsLoRA, per-module alpha): llama.cpp's scale is then 1.
  std::optional<double> alpha;
  uint64_t heads = 0, kv_heads = 0;                       // from the base config, when known (0: unknown)
  nlohmann::json module_paths = nlohmann::json::array();  // the dotted paths written, for a lossless read back
  std::vector<TensorMapping> mappings;  // canonical PEFT key -> output tensor name (or rejected, with why)
  std::vector<std::string> notes;
};

// `format` names the output in messages and picks the suffixes (kGguf or kGgufNames share them).
Result<LlamaCppLora> PlanLlamaCppLora(const Adapter& adapter, const WriteOptions& options, AdapterFormat format);

}  // namespace pb::adapter::internal
