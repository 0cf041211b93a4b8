// llama.cpp's LoRA adapter file, as convert_lora_to_gguf.py writes it (docs/gguf.md, "The container"): the
// keys general.architecture, general.type = adapter, adapter.type = lora, adapter.lora.alpha (FLOAT32),
// general.quantization_version, then ours (the PEFT config, the dotted module paths, the naming table, the head
// counts) so that reading the file back restores the adapter exactly; the tensors in the converter's order
// (sorted by their PEFT key, A before B), each in --outtype (Q8_0 falls back to F16 for a row length that is not
// a multiple of 32, as the converter does).
#include <algorithm>

#include "adapter/llama_cpp_lora.h"
#include "text/python_json.h"

namespace pb::adapter::internal {

namespace {

// The converter reads the adapter with safetensors' load_file, whose keys come sorted, and pairs A with B as
// they come: modules in the order of their PEFT A key.
void SortAsConverter(LlamaCppLora& lora) {
  std::vector<std::pair<std::string, size_t>> order;  // A key of each written module -> its pair's index
  size_t pair = 0;
  for (const auto& m : lora.mappings) {
    if (m.to.empty() || !m.to.ends_with(".lora_a")) continue;
    order.push_back({m.from, pair++});
  }
  std::stable_sort(order.begin(), order.end());
  std::vector<LlamaCppTensor> sorted;
  sorted.reserve(lora.tensors.size());
  for (const auto& [key, index] : order) {
    sorted.push_back(std::move(lora.tensors[2 * index]));
    sorted.push_back(std::move(lora.tensors[2 * index + 1]));
  }
  lora.tensors = std::move(sorted);
}

std::optional<std::vector<uint32_t>> InvocationTokens(const Json& document) {
  auto it = document.find("alora_invocation_tokens");
  if (it == document.end() || !it->is_array() || it->empty()) return std::nullopt;
  std::vector<uint32_t> tokens;
  for (const auto& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > UINT32_MAX) return std::nullopt;
    tokens.push_back(static_cast<uint32_t>(t.get<int64_t>()));
  }
  return tokens;
}

}  // namespace

Result<AdapterOutput> WriteGguf(const Adapter& adapter, const WriteOptions& options) {
  PB_ASSIGN_OR_RETURN(auto lora, PlanLlamaCppLora(adapter, options, AdapterFormat::kGguf));
  SortAsConverter(lora);
  const ArchTable* arch = lora.arch;
  AdapterOutput out;
  out.weights_name = BuiltinFormatTable(AdapterFormat::kGguf).weights_file;
  GgufOutput file;
  using gguf::KeyValue;
  file.keys.push_back(KeyValue::String("general.architecture", arch->gguf_arch));
  file.keys.push_back(KeyValue::String("general.type", "adapter"));
  file.keys.push_back(KeyValue::String("adapter.type", "lora"));
  // 0: llama.cpp applies the user's scale alone (B carries PEFT's scaling).
  file.keys.push_back(KeyValue::Float32("adapter.lora.alpha", static_cast<float>(lora.alpha.value_or(0))));
  if (auto tokens = InvocationTokens(adapter.config.document))
    file.keys.push_back(KeyValue::Uint32Array("adapter.alora.invocation_tokens", std::move(*tokens)));
  file.keys.push_back(KeyValue::Uint32("general.quantization_version", 2));  // GGML_QUANT_VERSION
  file.keys.push_back(KeyValue::String(kArchKey, arch->name));
  file.keys.push_back(KeyValue::String(kModulePathsKey, lora.module_paths.dump()));
  file.keys.push_back(KeyValue::String(
      kPeftConfigKey, text::DumpPythonJson(adapter.config.document, {.indent = -1, .sort_keys = true})));
  if (lora.heads) {
    file.keys.push_back(KeyValue::Uint32(arch->gguf_arch + ".attention.head_count", static_cast<uint32_t>(lora.heads)));
    file.keys.push_back(
        KeyValue::Uint32(arch->gguf_arch + ".attention.head_count_kv", static_cast<uint32_t>(lora.kv_heads)));
  }
  bool fell_back = false;
  for (auto& t : lora.tensors) {
    gguf::TensorType type = options.gguf_outtype;
    if (type == gguf::TensorType::kQ8_0 && !t.tensor.shape.empty() && t.tensor.shape.back() % 32 != 0) {
      type = gguf::TensorType::kF16;  // the converter's QuantError fallback
      fell_back = true;
    }
    file.slots.push_back({t.name, t.tensor.shape, type});
    file.tensors.push_back(std::move(t.tensor));
  }
  if (fell_back)
    lora.notes.push_back("q8_0: tensors whose rows are not a multiple of 32 long (lora_b at ranks below 32) are "
                         "written as F16, as convert_lora_to_gguf.py does");
  out.gguf = std::move(file);
  out.mappings = std::move(lora.mappings);
  out.notes = std::move(lora.notes);
  return out;
}

}  // namespace pb::adapter::internal
