// llama.cpp's LoRA layout (convert_lora_to_gguf.py), in a safetensors file (gguf-names) or a .gguf file
// (read_gguf.cc): <gguf tensor>.weight.lora_a = A, .weight.lora_b = B (rows reordered where llama.cpp reorders the
// base weight), token_embd's A transposed. Scaling: adapter.lora.alpha / rank, or folded into B when alpha is 0.
#include <cstdlib>
#include <map>

#include "adapter/format_internal.h"
#include "adapter/tensor_ops.h"

namespace pb::adapter::internal {

Result<ReadResult> ReadLlamaCppLayout(ReadState& state, const LlamaCppFile& file) {
  auto arch = ChooseArch(state.tables, state.options.arch, state.source.base_config);
  if (!arch.ok()) return arch.error();
  const ArchTable* table_arch = arch.value();
  if (!table_arch) {
    if (auto name = file.value(kArchKey)) table_arch = state.tables.Find(*name);
  }
  if (!table_arch) {
    if (auto gguf_arch = file.value("general.architecture")) {
      for (const auto& t : state.tables.arches())
        if (t.gguf_arch == *gguf_arch) {
          table_arch = &t;
          break;
        }
    }
  }
  if (!table_arch)
    return MakeError(ErrorCode::InvalidArgument,
                     "llama.cpp tensor names need an architecture: pass --arch or --base-config (the file has no "
                     "general.architecture that a naming table knows)");
  state.result.adapter.arch = table_arch->name;

  // Prefer the dotted paths peft-bridge recorded; else the table's first body prefix (a *ForCausalLM model).
  std::map<std::string, std::string> recorded;  // gguf base name -> dotted path
  if (auto paths = file.value(kModulePathsKey)) {
    PB_ASSIGN_OR_RETURN(auto list, ParseJson(*paths, file.what + kModulePathsKey));
    if (list.is_array())
      for (const auto& p : list)
        if (p.is_string())
          if (auto m = state.tables.MatchHf(*table_arch, p.get<std::string>()); m && m->gguf)
            recorded[*m->gguf] = m->hf;
  }
  auto heads = file.value(table_arch->gguf_arch + ".attention.head_count");
  auto kv_heads = file.value(table_arch->gguf_arch + ".attention.head_count_kv");
  uint64_t n_head = heads ? std::strtoull(heads->c_str(), nullptr, 10)
                          : ConfigInt(state.source.base_config, "num_attention_heads").value_or(0);
  uint64_t n_kv = kv_heads ? std::strtoull(kv_heads->c_str(), nullptr, 10)
                           : ConfigInt(state.source.base_config, "num_key_value_heads").value_or(n_head);

  const FormatTable& table = BuiltinFormatTable(AdapterFormat::kGgufNames);
  const std::string prefix = table_arch->body_prefixes.empty() ? "" : table_arch->body_prefixes.front();
  for (size_t i = 0; i < file.tensor_count; ++i) {
    const std::string name = file.name(i);
    auto key = SplitFormatKey(table, name);
    if (!key) {
      state.Reject(name, "not a llama.cpp LoRA tensor (expected <tensor>.weight.lora_a or .weight.lora_b)");
      continue;
    }
    std::optional<ModuleMatch> match;
    if (auto it = recorded.find(key->spelled_path); it != recorded.end())
      match = state.tables.MatchHf(*table_arch, it->second);
    if (!match) match = state.tables.FromGguf(*table_arch, key->spelled_path, prefix);
    if (!match) {
      state.Reject(name, "the " + table_arch->name + " naming table has no module for `" + key->spelled_path + "`");
      continue;
    }
    const bool embedding = match->tmpl->kind == ModuleKind::kEmbedding;
    const bool is_a = key->spelling->role == FormatRole::kLoraA || key->spelling->role == FormatRole::kEmbeddingA;
    Result<Tensor> loaded = file.load(i);
    if (!loaded.ok()) {
      state.Reject(name, loaded.error().message);
      continue;
    }
    Tensor t = std::move(loaded.value());
    // llama.cpp's loader takes 2-D factors only (A [in, r], B [r, out] in ggml's order); anything else, a scalar
    // or an empty factor included, is no LoRA tensor it could apply.
    if (t.shape.size() != 2 || t.shape[0] == 0 || t.shape[1] == 0) {
      state.Reject(name, "a llama.cpp LoRA factor is 2-D and non-empty; this one is " + ShapeText(t.shape));
      continue;
    }
    std::string action = "copy";
    if (embedding && is_a) {
      PB_ASSIGN_OR_RETURN(auto tr, Transpose2D(t));
      t = std::move(tr);
      action = "transpose";
    }
    if (!is_a && match->tmpl->gguf_permute) {
      const auto& p = *match->tmpl->gguf_permute;
      if (n_head == 0) {
        state.Reject(name, "llama.cpp reorders this weight's rows by head; the head count is unknown (no " +
                               table_arch->gguf_arch + ".attention.head_count metadata, no --base-config)");
        continue;
      }
      PB_ASSIGN_OR_RETURN(auto order, GgufRowOrder(p, t.shape.empty() ? 0 : t.shape[0], n_head, n_kv));
      PB_ASSIGN_OR_RETURN(auto un, PermuteRows(t, InvertOrder(order)));
      t = std::move(un);
      action = "unpermute rows (" + std::string(RowPermutationKindName(p.kind)) + ")";
    }
    PeftRole role = embedding ? (is_a ? PeftRole::kEmbeddingA : PeftRole::kEmbeddingB)
                              : (is_a ? PeftRole::kLoraA : PeftRole::kLoraB);
    state.AddRole(name, match->hf, role, std::move(t), action);
  }

  // llama.cpp pairs .lora_a with .lora_b ("LoRA tensor pair ... is missing one component"): a half whose other half
  // is missing or was rejected is rejected too, saying so, rather than failing the whole read.
  {
    std::map<std::string, int> halves;  // module -> bit 1: A, bit 2: B
    for (const auto& rt : state.role_tensors)
      halves[rt.module] |= (rt.role == PeftRole::kLoraA || rt.role == PeftRole::kEmbeddingA) ? 1 : 2;
    size_t kept = 0;
    for (size_t i = 0; i < state.role_tensors.size(); ++i) {
      if (halves[state.role_tensors[i].module] != 3) {
        const bool is_a = state.role_tensors[i].role == PeftRole::kLoraA ||
                          state.role_tensors[i].role == PeftRole::kEmbeddingA;
        state.Reject(state.role_sources[i], std::string("its pair's ") + (is_a ? ".lora_b" : ".lora_a") +
                                                " tensor is missing or rejected (llama.cpp needs both halves)");
        continue;
      }
      if (kept != i) {
        state.role_tensors[kept] = std::move(state.role_tensors[i]);
        state.role_sources[kept] = std::move(state.role_sources[i]);
        state.role_actions[kept] = std::move(state.role_actions[i]);
      }
      ++kept;
    }
    state.role_tensors.resize(kept);
    state.role_sources.resize(kept);
    state.role_actions.resize(kept);
  }

  double alpha = 0;
  if (auto a = file.value("adapter.lora.alpha")) alpha = std::strtod(a->c_str(), nullptr);
  Json doc;
  bool have_doc = false;
  if (auto carried = file.value(kPeftConfigKey)) {
    PB_ASSIGN_OR_RETURN(auto parsed, ParseJson(*carried, file.what + kPeftConfigKey));
    doc = std::move(parsed);
    // The carried config holds only when the scaling was not folded into B (alpha kept).
    have_doc = doc.is_object() && alpha != 0;
  }
  if (!have_doc) {
    // llama.cpp: scale = alpha / rank, or 1 when alpha is 0 (then B already carries PEFT's scaling).
    std::vector<std::pair<std::string, std::pair<int64_t, double>>> rank_alpha;
    for (const auto& rt : state.role_tensors) {
      if (rt.role != PeftRole::kLoraA && rt.role != PeftRole::kEmbeddingA) continue;
      int64_t r = static_cast<int64_t>(rt.tensor.shape[0]);
      rank_alpha.push_back({rt.module, {r, alpha != 0 ? alpha : static_cast<double>(r)}});
    }
    doc = SynthesizeConfig(rank_alpha, false, std::nullopt);
  }
  PB_ASSIGN_OR_RETURN(auto config, ConfigFromDocument(doc));
  return state.Finish(std::move(config));
}


Result<ReadResult> ReadGgufNames(ReadState& state) {
  LlamaCppFile file;
  file.what = "safetensors metadata ";
  file.value = [&](std::string_view key) -> std::optional<std::string> {
    for (const auto& [k, v] : state.header.metadata())
      if (k == key) return v;
    return std::nullopt;
  };
  file.tensor_count = state.header.tensor_count();
  file.name = [&](size_t i) { return std::string(state.header.tensor(i).name); };
  file.load = [&](size_t i) -> Result<Tensor> { return state.Load(i); };
  return ReadLlamaCppLayout(state, file);
}

}  // namespace pb::adapter::internal
