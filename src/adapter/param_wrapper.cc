#include "adapter/param_wrapper.h"

#include <algorithm>
#include <array>

#include "adapter/module_select.h"

namespace pb::adapter {

namespace {

constexpr std::string_view kBaseLayer = ".base_layer";

// Registration order of transformers 5.24's fused-experts parameters (checked over every `*Experts` class of its
// models/: gate_up_proj, or up_proj where the gate is separate, before down_proj). nullopt: not known.
std::optional<int> RegistrationRank(std::string_view parameter) {
  if (parameter == "gate_up_proj" || parameter == "up_proj") return 0;
  if (parameter == "down_proj") return 1;
  return std::nullopt;
}

// PEFT's match: `key in target_names or key.endswith("." + target)` for key = holder.parameter.
bool Names(std::string_view entry, std::string_view key) {
  return key == entry ||
         (key.size() > entry.size() && key.ends_with(entry) && key[key.size() - entry.size() - 1] == '.');
}

// A bare entry ("down_proj", as PEFT's own conversion of MLP targets writes them) names a parameter of any module,
// and the adapter does not say which modules have one; the factors of a module PEFT wraps as a module have the
// same keys as an outermost ParamWrapper's. PEFT refuses to put both on one module (create_and_replace_param:
// "not a valid target"), so a module target_modules selects is a module LoRA. With target_modules null, every
// LoRA is on parameters; with "all-linear" (only nn.Linear / Conv1D), the module must be an `experts` container,
// the name every transformers 5.24 MoE block gives its fused experts.
bool HoldsParameters(const LoraConfig& config, const std::string& holder) {
  if (config.target_modules.form == ModuleSelector::Form::kNone) return true;
  if (auto targeted = IsTargeted(config, holder)) return !*targeted;
  return holder == "experts" || holder.ends_with(".experts");
}

}  // namespace

std::optional<Result<ExpertsTarget>> ParamWrapperOf(const LoraConfig& config, std::string_view key_module) {
  if (config.target_parameters.empty()) return std::nullopt;
  ExpertsTarget t;
  std::string_view holder = key_module;
  while (holder.ends_with(kBaseLayer)) {
    holder.remove_suffix(kBaseLayer.size());
    ++t.depth;
  }
  t.holder = std::string(holder);
  bool qualified = false;  // an entry names the module too ("mlp.experts.down_proj"), not only the parameter
  for (const std::string& entry : config.target_parameters) {
    const size_t dot = entry.rfind('.');
    const std::string leaf = dot == std::string::npos ? entry : entry.substr(dot + 1);
    if (!Names(entry, t.holder + "." + leaf)) continue;
    qualified = qualified || dot != std::string::npos;
    if (std::find(t.wrapped.begin(), t.wrapped.end(), leaf) == t.wrapped.end()) t.wrapped.push_back(leaf);
  }
  if (t.wrapped.empty()) return std::nullopt;
  if (!qualified && t.depth == 0 && !HoldsParameters(config, t.holder)) return std::nullopt;
  auto refuse = [&](const std::string& why) -> std::optional<Result<ExpertsTarget>> {
    return Result<ExpertsTarget>(
        MakeError(ErrorCode::UnsupportedAdapter, "LoRA on parameters of `" + t.holder + "`: " + why));
  };
  if (t.wrapped.size() > 1) {
    std::vector<std::pair<int, std::string>> ranked;
    for (const auto& p : t.wrapped) {
      auto rank = RegistrationRank(p);
      if (!rank)
        return refuse("target_parameters names several of its parameters, and which factors belong to `" + p +
                      "` depends on the order the model class registers them, which the adapter does not record "
                      "(known for transformers' fused experts: gate_up_proj or up_proj, then down_proj)");
      ranked.emplace_back(*rank, p);
    }
    std::sort(ranked.begin(), ranked.end());
    for (size_t i = 1; i < ranked.size(); ++i)
      if (ranked[i].first == ranked[i - 1].first)
        return refuse("target_parameters names both `" + ranked[i - 1].second + "` and `" + ranked[i].second +
                      "`, whose registration order is not known");
    t.wrapped.clear();
    for (auto& [rank, p] : ranked) t.wrapped.push_back(p);
  }
  if (t.depth >= t.wrapped.size())
    return refuse("the key has " + std::to_string(t.depth) + " `.base_layer` level(s) but target_parameters names " +
                  std::to_string(t.wrapped.size()) + " of its parameters, so no parameter is wrapped that deep");
  // The outermost wrapper (depth 0) wraps the last-registered parameter; the innermost, the first.
  t.parameter = t.wrapped[t.wrapped.size() - 1 - t.depth];
  t.parameter_path = t.holder + "." + t.parameter;
  return Result<ExpertsTarget>(std::move(t));
}

bool ExpertsAreTransposed(std::string_view model_type) {
  constexpr std::array<std::string_view, 3> kTransposed = {"gpt_oss", "aria", "openai_privacy_filter"};
  return std::find(kTransposed.begin(), kTransposed.end(), model_type) != kTransposed.end();
}

std::string ExpertsNotHeldReason(std::string_view format, const ExpertsTarget& t) {
  return std::string(format) + " has no LoRA layout for a fused experts parameter (`" + t.parameter_path + "`, " +
         std::to_string(t.num_experts) + " experts: PEFT's target_parameters); only PEFT's own format holds it";
}

}  // namespace pb::adapter
