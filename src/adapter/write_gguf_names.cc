// llama.cpp's LoRA layout (what convert_lora_to_gguf.py produces), in a safetensors file (llama_cpp_lora.h);
// the GGUF keys it would carry become __metadata__ strings. llama.cpp scales every pair by adapter.lora.alpha /
// rank, so per-module alpha and rsLoRA cannot be stated: then PEFT's scaling is folded into B and alpha is
// written as 0 (scale 1).
#include "adapter/llama_cpp_lora.h"
#include "text/python_json.h"

namespace pb::adapter::internal {

Result<AdapterOutput> WriteGgufNames(const Adapter& adapter, const WriteOptions& options) {
  PB_ASSIGN_OR_RETURN(auto lora, PlanLlamaCppLora(adapter, options, AdapterFormat::kGgufNames));
  const FormatTable& table = BuiltinFormatTable(AdapterFormat::kGgufNames);
  AdapterOutput out;
  out.weights_name = table.weights_file;
  for (auto& t : lora.tensors) {
    out.weights.tensors.push_back({t.name, t.tensor.dtype, t.tensor.shape});
    out.weights.Add(std::move(t.tensor));
  }
  const ArchTable* arch = lora.arch;
  Metadata meta = table.metadata.value_or(Metadata{});
  meta.emplace_back("general.architecture", arch->gguf_arch);
  meta.emplace_back(kArchKey, arch->name);  // several tables can share one llama.cpp architecture
  meta.emplace_back("adapter.lora.alpha", lora.alpha ? text::PythonFloatRepr(*lora.alpha) : "0");
  if (lora.heads) {
    meta.emplace_back(arch->gguf_arch + ".attention.head_count", std::to_string(lora.heads));
    meta.emplace_back(arch->gguf_arch + ".attention.head_count_kv", std::to_string(lora.kv_heads));
  }
  meta.emplace_back(kPeftConfigKey, text::DumpPythonJson(adapter.config.document, {.indent = -1, .sort_keys = true}));
  meta.emplace_back(kModulePathsKey, lora.module_paths.dump());
  out.weights.metadata = std::move(meta);
  out.mappings = std::move(lora.mappings);
  out.notes = std::move(lora.notes);
  return out;
}

}  // namespace pb::adapter::internal
