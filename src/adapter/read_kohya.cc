// kohya-ss style LoRA: <prefix><module path with "_" for ".">.lora_down.weight (A), .lora_up.weight (B),
// .alpha (0-dim; scale = alpha / rank, alpha = rank when absent), .dora_scale (DoRA, output-axis form only).
// The dots are recovered from peft-bridge's own metadata when present, else from an architecture table.
#include <map>

#include "adapter/format_internal.h"
#include "adapter/kohya_names.h"
#include "adapter/tensor_ops.h"

namespace pb::adapter::internal {

namespace {

std::string Underscored(std::string_view path) {
  std::string s(path);
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

std::optional<std::string> MetadataValue(const Header& header, std::string_view key) {
  for (const auto& [k, v] : header.metadata())
    if (k == key) return v;
  return std::nullopt;
}

}  // namespace

Result<ReadResult> ReadKohya(ReadState& state) {
  auto arch = ChooseArch(state.tables, state.options.arch, state.source.base_config);
  if (!arch.ok()) return arch.error();
  const FormatTable& table = BuiltinFormatTable(AdapterFormat::kKohya);
  // Dotted paths written by peft-bridge: exact, whatever the architecture. By the full kohya name (the prefix
  // chosen by component, adapter/kohya_names.h), and by the path after any prefix, as files written before the
  // component prefixes have it.
  std::map<std::string, std::string> by_name, dotted;
  if (auto paths = MetadataValue(state.header, kModulePathsKey)) {
    PB_ASSIGN_OR_RETURN(auto list, ParseJson(*paths, std::string("safetensors metadata ") + kModulePathsKey));
    std::vector<std::string> listed;
    if (list.is_array())
      for (const auto& p : list)
        if (p.is_string()) listed.push_back(p.get<std::string>());
    const bool second_text_encoder = HasSecondTextEncoder(listed);
    const std::string prefix = table.write_prefix.value_or(table.prefixes.front());
    for (const auto& p : listed) {
      by_name[KohyaBaseName(p, second_text_encoder, prefix)] = p;
      dotted[Underscored(p)] = p;
    }
  }
  auto resolve = [&](const FormatKey& key) -> std::optional<std::string> {
    if (auto it = by_name.find(key.prefix + key.spelled_path); it != by_name.end()) return it->second;
    const std::string& underscored = key.spelled_path;
    if (auto it = dotted.find(underscored); it != dotted.end()) return it->second;
    if (arch.value()) {
      if (auto m = state.tables.FromUnderscored(*arch.value(), underscored)) return m->hf;
      return std::nullopt;
    }
    std::optional<std::string> found;  // no table chosen: accept a unique answer across all tables
    for (const auto& t : state.tables.arches()) {
      if (auto m = state.tables.FromUnderscored(t, underscored)) {
        if (found && *found != m->hf) return std::nullopt;
        found = m->hf;
      }
    }
    return found;
  };

  std::map<std::string, double> alphas;  // module -> alpha tensor value
  std::map<std::string, std::string> alpha_keys;
  std::map<std::string, Tensor> magnitudes;  // module -> dora_scale, checked once B is known
  std::map<std::string, std::string> magnitude_keys;
  for (size_t i = 0; i < state.header.tensor_count(); ++i) {
    const std::string name(state.header.tensor(i).name);
    auto key = SplitFormatKey(table, name);
    if (!key) {
      state.Reject(name, "not a kohya LoRA tensor (expected lora_*_<module>.lora_down.weight, .lora_up.weight, "
                         ".alpha or .dora_scale)");
      continue;
    }
    auto module = resolve(*key);
    if (!module) {
      state.Reject(name, "cannot put the dots back into `" + key->spelled_path +
                             "`: no naming table matches it exactly once (pass --arch or --base-config)");
      continue;
    }
    Tensor t = state.Load(i);
    switch (key->spelling->role) {
      case FormatRole::kLoraA: state.AddRole(name, *module, PeftRole::kLoraA, std::move(t), "copy"); break;
      case FormatRole::kLoraB: state.AddRole(name, *module, PeftRole::kLoraB, std::move(t), "copy"); break;
      case FormatRole::kAlpha: {
        auto v = ScalarValue(t);
        if (!v.ok()) {
          state.Reject(name, "alpha must hold one floating-point value");
          break;
        }
        alphas[*module] = v.value();
        alpha_keys[*module] = name;
        break;
      }
      case FormatRole::kMagnitude:
        magnitudes[*module] = std::move(t);
        magnitude_keys[*module] = name;
        break;
      default: state.Reject(name, "role not used by kohya files"); break;
    }
  }
  // DoRA: only the output-axis form ([out] or [out, 1]) is PEFT's magnitude vector.
  std::map<std::string, uint64_t> out_features;
  for (const auto& rt : state.role_tensors)
    if (rt.role == PeftRole::kLoraB && !rt.tensor.shape.empty()) out_features[rt.module] = rt.tensor.shape[0];
  for (auto& [module, t] : magnitudes) {
    auto out = out_features.find(module);
    if (out != out_features.end() && !t.shape.empty() && t.shape[0] == out->second &&
        t.element_count() == out->second) {
      t.shape = {out->second};
      state.AddRole(magnitude_keys[module], module, PeftRole::kMagnitude, std::move(t), "reshape");
    } else {
      state.Reject(magnitude_keys[module], "dora_scale normalises over the input axis (ComfyUI's older form); PEFT's "
                                           "magnitude is per output row, so it cannot be converted");
    }
  }

  Json doc;
  bool have_doc = false;
  if (auto carried = MetadataValue(state.header, kPeftConfigKey)) {
    PB_ASSIGN_OR_RETURN(auto parsed, ParseJson(*carried, std::string("safetensors metadata ") + kPeftConfigKey));
    doc = std::move(parsed);
    have_doc = doc.is_object();
  }
  if (!have_doc) {
    std::vector<std::pair<std::string, std::pair<int64_t, double>>> rank_alpha;
    for (const auto& rt : state.role_tensors) {
      if (rt.role != PeftRole::kLoraA) continue;
      int64_t r = static_cast<int64_t>(rt.tensor.shape[0]);
      auto a = alphas.find(rt.module);
      rank_alpha.push_back({rt.module, {r, a == alphas.end() ? static_cast<double>(r) : a->second}});
    }
    doc = SynthesizeConfig(rank_alpha, !magnitudes.empty(), std::nullopt);
  }
  // The alpha tensors are consumed into the config.
  for (const auto& [module, key] : alpha_keys)
    state.result.mappings.push_back({key, "adapter_config.json", "alpha", ""});
  if (arch.value()) state.result.adapter.arch = arch.value()->name;
  PB_ASSIGN_OR_RETURN(auto config, ConfigFromDocument(doc));
  return state.Finish(std::move(config));
}

}  // namespace pb::adapter::internal
