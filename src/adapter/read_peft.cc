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
  for (auto& head : TaskHeadModules(config.task_type.value_or(""))) names.push_back(std::move(head));
  return names;
}

std::string_view ModuleOf(std::string_view key) {
  size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : key.substr(0, dot);
}

bool EndsWithComponent(std::string_view path, std::string_view name) {
  return path == name ||
         (path.size() > name.size() && path.ends_with(name) && path[path.size() - name.size() - 1] == '.');
}

// Why a key that is not a LoRA factor of this adapter type is not understood.
std::string ForeignTensorReason(std::string_view key) {
  struct Marker {
    std::string_view text;
    std::string_view type;
  };
  constexpr std::array<Marker, 6> kMarkers = {{{"hada_", "LoHa"},
                                               {"lokr_", "LoKr"},
                                               {"ia3_l", "IA3"},
                                               {".lora_E", "AdaLoRA"},
                                               {"lora_", "LoRA"},
                                               {"vera_", "VeRA"}}};
  for (const auto& m : kMarkers) {
    if (key.find(m.text) == std::string_view::npos) continue;
    if (m.type == "LoRA")
      return "looks like a LoRA tensor but is not one PEFT saves (an adapter name left in the key, or an unknown role)";
    return "a " + std::string(m.type) + " tensor in a LORA adapter";
  }
  return "not a LoRA factor and not part of a module in modules_to_save: PEFT would not load it into the adapter";
}

// The rows a trainable-tokens tensor of `module` replaces, from the config's trainable_token_indices: a list is
// the input embedding's (the one module PEFT wraps for it); an object maps module names to lists, matched as
// PEFT's _set_trainable does (the module path ends with the name, a plain string suffix). The tensor holds one
// row per index (PEFT's load refuses any other shape).
Result<std::vector<uint64_t>> TokenIndicesFor(const LoraConfig& config, const std::string& module, const Tensor& rows) {
  auto fail = [&](const std::string& what) {
    return MakeError(ErrorCode::InvalidConfig, "trainable tokens of `" + module + "`: " + what);
  };
  if (!config.trainable_token_indices)
    return fail("the adapter has a trainable_tokens_delta tensor but its config has no trainable_token_indices");
  const Json& spec = *config.trainable_token_indices;
  const Json* list = nullptr;
  if (spec.is_array()) {
    list = &spec;
  } else {
    for (const auto& [name, value] : spec.items())
      if (module.ends_with(name)) {
        if (list && *list != value)
          return fail("trainable_token_indices has two entries that name it with different indices");
        list = &value;
      }
    if (!list) return fail("no entry of trainable_token_indices names this module");
  }
  if (!list->is_array()) return fail("its trainable_token_indices entry is not a list");
  std::vector<uint64_t> indices;
  for (const Json& i : *list) {
    if (!i.is_number_integer() || i.get<int64_t>() < 0)
      return fail("token index " + i.dump() + " is not a non-negative integer");
    indices.push_back(i.get<uint64_t>());
  }
  if (rows.shape.size() != 2 || rows.shape[0] != indices.size())
    return MakeError(ErrorCode::ShapeMismatch,
                     "trainable tokens of `" + module + "`: the tensor has " +
                         (rows.shape.empty() ? std::string("no") : std::to_string(rows.shape[0])) +
                         " rows but trainable_token_indices lists " + std::to_string(indices.size()) + " tokens");
  return indices;
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
        ExtraTensor extra{key, ExtraKind::kTrainableTokens, state.Load(i), {}};
        PB_ASSIGN_OR_RETURN(extra.token_indices, TokenIndicesFor(cfg, parsed->module, extra.tensor));
        adapter.extras.push_back(std::move(extra));
        state.result.mappings.push_back({name, key, "copy", ""});
        continue;
      }
      if (auto wrapped = ParamWrapperOf(cfg, parsed->module)) {
        // LoRA on a parameter (target_parameters): PEFT's ParamWrapper has lora_A and lora_B only.
        if (!wrapped->ok()) {
          state.Reject(name, wrapped->error().message);
        } else if (parsed->role != PeftRole::kLoraA && parsed->role != PeftRole::kLoraB) {
          state.Reject(name, "PEFT's ParamWrapper (LoRA on parameter `" + wrapped->value().parameter_path +
                                 "`) has only lora_A and lora_B: it would not load this tensor");
        } else {
          state.AddRole(name, parsed->module, parsed->role, state.Load(i), "copy");
        }
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
