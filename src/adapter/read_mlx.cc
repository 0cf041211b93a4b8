// mlx-lm adapters: adapters.safetensors (lora_a = A^T [in, r], lora_b = B^T [r, out], DoRA `m`) and an
// adapter_config.json of training arguments, of which lora_parameters.rank / scale, fine_tune_type and
// num_layers (older: lora_layers) matter. The scale is PEFT's scaling s itself, so alpha = s * r.
#include <set>

#include "adapter/format_internal.h"
#include "adapter/tensor_ops.h"

namespace pb::adapter::internal {

namespace {

bool LooksLikeEmbedding(std::string_view module, const ArchTable* arch, const NamingTables& tables,
                        const std::set<std::string, std::less<>>& recorded) {
  if (recorded.contains(module)) return true;
  if (arch) {
    if (auto m = tables.MatchHf(*arch, module)) return m->tmpl->kind == ModuleKind::kEmbedding;
  }
  return module.ends_with("embed_tokens") || module.ends_with("wte") || module.ends_with("word_embeddings");
}

}  // namespace

Result<ReadResult> ReadMlx(ReadState& state) {
  if (!state.source.config)
    return MakeError(ErrorCode::InvalidConfig,
                     "adapter_config.json is missing: mlx-lm keeps the LoRA rank and scale there");
  PB_ASSIGN_OR_RETURN(auto parsed, ParseJson(*state.source.config, "adapter_config.json"));
  Json& cfg = parsed;
  if (!cfg.is_object()) return MakeError(ErrorCode::InvalidConfig, "adapter_config.json is not a JSON object");
  std::string fine_tune_type = "lora";
  if (cfg.contains("fine_tune_type")) {
    if (!cfg["fine_tune_type"].is_string())
      return MakeError(ErrorCode::InvalidConfig, "adapter_config.json: `fine_tune_type` must be a string");
    fine_tune_type = cfg["fine_tune_type"].get<std::string>();
  }
  if (fine_tune_type == "full")
    return MakeError(ErrorCode::UnsupportedAdapter,
                     "mlx-lm fine_tune_type \"full\" saves full weights, not an adapter");
  if (fine_tune_type != "lora" && fine_tune_type != "dora")
    return MakeError(ErrorCode::UnsupportedAdapter,
                     "mlx-lm fine_tune_type \"" + fine_tune_type + "\" is not supported");
  double scale = 20.0;  // mlx-lm's default when lora_parameters leaves it out
  auto params = cfg.find("lora_parameters");
  if (params != cfg.end() && params->is_object() && params->contains("scale")) {
    if (!(*params)["scale"].is_number())
      return MakeError(ErrorCode::InvalidConfig, "adapter_config.json: `lora_parameters.scale` must be a number");
    scale = (*params)["scale"].get<double>();
  }
  auto arch = ChooseArch(state.tables, state.options.arch, state.source.base_config);
  if (!arch.ok()) return arch.error();
  std::set<std::string, std::less<>> embedding_modules;  // as write_mlx.cc records them
  if (auto recorded = cfg.find(kEmbeddingModulesKey); recorded != cfg.end()) {
    if (!recorded->is_array())
      return MakeError(ErrorCode::InvalidConfig, std::string("adapter_config.json: `") + kEmbeddingModulesKey +
                                                     "` must be a list of module paths");
    for (const auto& m : *recorded) {
      if (!m.is_string())
        return MakeError(ErrorCode::InvalidConfig, std::string("adapter_config.json: `") + kEmbeddingModulesKey +
                                                       "` must be a list of module paths");
      embedding_modules.insert(m.get<std::string>());
    }
  }

  const FormatTable& table = BuiltinFormatTable(AdapterFormat::kMlx);
  for (size_t i = 0; i < state.header.tensor_count(); ++i) {
    const std::string name(state.header.tensor(i).name);
    auto key = SplitFormatKey(table, name);
    if (!key) {
      state.Reject(name, "not an mlx-lm LoRA tensor (expected <module>.lora_a, .lora_b or .m)");
      continue;
    }
    const std::string& module = key->spelled_path;
    const bool embedding = LooksLikeEmbedding(module, arch.value(), state.tables, embedding_modules);
    Tensor t = state.Load(i);
    FormatRole role = key->spelling->role;
    if (role == FormatRole::kMagnitude) {
      if (embedding) {
        state.Reject(name, "mlx-lm's embedding DoRA magnitude is per token ([num_embeddings]); PEFT's is per "
                           "dimension, so it cannot be converted");
        continue;
      }
      state.AddRole(name, module, PeftRole::kMagnitude, std::move(t), "copy");
      continue;
    }
    if (t.shape.size() != 2) {
      state.Reject(name, "mlx-lm LoRA factors are 2-D; switch (MoE) layers [experts, ...] are not supported");
      continue;
    }
    PB_ASSIGN_OR_RETURN(auto transposed, Transpose2D(t));
    PeftRole peft_role = role == FormatRole::kLoraA || role == FormatRole::kEmbeddingA
                             ? (embedding ? PeftRole::kEmbeddingA : PeftRole::kLoraA)
                             : (embedding ? PeftRole::kEmbeddingB : PeftRole::kLoraB);
    state.AddRole(name, module, peft_role, std::move(transposed), "transpose");
  }

  // PEFT meaning: per module r from the tensors, alpha = scale * r (mlx's scale is the final multiplier).
  Json doc;
  if (cfg.contains(kPeftConfigKey) && cfg[kPeftConfigKey].is_object()) {
    doc = cfg[kPeftConfigKey];  // written by peft-bridge: the original PEFT config, exactly
  } else {
    std::vector<std::pair<std::string, std::pair<int64_t, double>>> rank_alpha;
    for (const auto& rt : state.role_tensors) {
      if (rt.role != PeftRole::kLoraA && rt.role != PeftRole::kEmbeddingA) continue;
      int64_t r = static_cast<int64_t>(rt.tensor.shape[0]);
      rank_alpha.push_back({rt.module, {r, scale * static_cast<double>(r)}});
    }
    std::optional<std::string> model;
    if (cfg.contains("model") && cfg["model"].is_string()) model = cfg["model"].get<std::string>();
    doc = SynthesizeConfig(rank_alpha, fine_tune_type == "dora", model);
    doc["task_type"] = "CAUSAL_LM";  // mlx-lm trains language models
    if (cfg.contains("lora_parameters") && cfg["lora_parameters"].is_object() &&
        cfg["lora_parameters"].contains("dropout") && cfg["lora_parameters"]["dropout"].is_number())
      doc["lora_dropout"] = cfg["lora_parameters"]["dropout"];
  }
  if (arch.value()) state.result.adapter.arch = arch.value()->name;
  PB_ASSIGN_OR_RETURN(auto config, ConfigFromDocument(doc));
  return state.Finish(std::move(config));
}

}  // namespace pb::adapter::internal
