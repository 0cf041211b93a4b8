// PEFT's own files: adapter_config.json + adapter_model.safetensors with "base_model.model." keys.
#include <array>

#include "adapter/format_internal.h"

namespace pb::adapter::internal {

namespace {

constexpr std::string_view kPrefix = "base_model.model.";

// PEFT adds these heads to modules_to_save on its own for some task types (peft_model.py), and saves them
// without listing them in the config.
std::vector<std::string> ImpliedModulesToSave(const LoraConfig& config) {
  std::vector<std::string> names = config.modules_to_save;
  if (config.task_type == "SEQ_CLS" || config.task_type == "TOKEN_CLS") {
    names.push_back("classifier");
    names.push_back("score");
  } else if (config.task_type == "QUESTION_ANS") {
    names.push_back("qa_outputs");
  }
  return names;
}

std::string_view ModuleOf(std::string_view key) {
  size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : key.substr(0, dot);
}

bool EndsWithComponent(std::string_view path, std::string_view name) {
  return path == name || (path.size() > name.size() && path.ends_with(name) && path[path.size() - name.size() - 1] == '.');
}

// Why a key that is not a LoRA factor of this adapter type is not understood.
std::string ForeignTensorReason(std::string_view key) {
  struct Marker {
    std::string_view text;
    std::string_view type;
  };
  constexpr std::array<Marker, 6> kMarkers = {{{"hada_", "LoHa"}, {"lokr_", "LoKr"}, {"ia3_l", "IA3"},
                                               {".lora_E", "AdaLoRA"}, {"lora_", "LoRA"}, {"vera_", "VeRA"}}};
  for (const auto& m : kMarkers) {
    if (key.find(m.text) == std::string_view::npos) continue;
    if (m.type == "LoRA")
      return "looks like a LoRA tensor but is not one PEFT saves (an adapter name left in the key, or an unknown role)";
    return "a " + std::string(m.type) + " tensor in a LORA adapter";
  }
  return "not a LoRA factor and not part of a module in modules_to_save: PEFT would not load it into the adapter";
}

}  // namespace

Result<ReadResult> ReadPeft(ReadState& state) {
  if (!state.source.config)
    return MakeError(ErrorCode::InvalidConfig, "adapter_config.json is missing: a PEFT adapter needs it for r, "
                                               "lora_alpha and the target modules");
  PB_ASSIGN_OR_RETURN(auto config, ParseLoraConfig(*state.source.config));
  const LoraConfig& cfg = config;
  const auto modules_to_save = ImpliedModulesToSave(cfg);
  auto& adapter = state.result.adapter;

  for (size_t i = 0; i < state.header.tensor_count(); ++i) {
    const std::string name(state.header.tensor(i).name);
    if (!name.starts_with(kPrefix)) {
      state.Reject(name, "no `base_model.model.` prefix: PEFT maps nothing to it and ignores it");
      continue;
    }
    const std::string key = name.substr(kPrefix.size());
    if (auto parsed = ParsePeftLoraKey(key)) {
      if (parsed->role == PeftRole::kTrainableTokens) {
        adapter.extras.push_back({key, ExtraKind::kTrainableTokens, state.Load(i)});
        state.result.mappings.push_back({name, key, "copy", ""});
        continue;
      }
      if (IsTargeted(cfg, parsed->module) == false) {
        state.Reject(name, "the config does not target `" + parsed->module +
                               "`: PEFT creates no LoRA layer there and ignores this tensor");
        continue;
      }
      state.AddRole(name, parsed->module, parsed->role, state.Load(i), "copy");
      continue;
    }
    std::string_view module = ModuleOf(key);
    std::optional<ExtraKind> kind;
    if (key.ends_with(".base_layer.weight") &&
        (EndsWithComponent(ModuleOf(module), "embed_tokens") || EndsWithComponent(ModuleOf(module), "lm_head"))) {
      kind = ExtraKind::kSavedEmbedding;
    } else if (EndsWithComponent(module, "embed_tokens") || EndsWithComponent(module, "lm_head")) {
      kind = ExtraKind::kSavedEmbedding;
    } else if (key.ends_with(".bias") && cfg.bias != "none") {
      kind = ExtraKind::kBias;
    }
    for (const auto& m : modules_to_save) {
      // PEFT wraps a module when its name ends with the entry (plain string suffix, _set_trainable).
      for (std::string_view path = module; !kind && !path.empty(); path = ModuleOf(path))
        if (path.ends_with(m)) kind = ExtraKind::kModulesToSave;
    }
    if (kind) {
      adapter.extras.push_back({key, *kind, state.Load(i)});
      state.result.mappings.push_back({name, key, "copy", ""});
    } else {
      state.Reject(name, ForeignTensorReason(key));
    }
  }
  return state.Finish(std::move(config));
}

}  // namespace pb::adapter::internal
