#include "app/create_report.h"

#include <nlohmann/json.hpp>

#include "adapter/naming_tables.h"
#include "text/python_json.h"
#include "app/push_target.h"
#include "text/size_text.h"
#include "net/remote_address.h"

namespace pb::app {
namespace {

std::string InitName(const compose::CreatePlan& plan) {
  return plan.options.init == compose::CreateInit::kGaussian ? "gaussian" : "kaiming";
}

std::string AlphaText(const compose::CreateOptions& o) {
  return o.alpha_is_int ? std::to_string(int64_t(o.alpha)) : text::PythonFloatRepr(o.alpha);
}

}  // namespace

compose::CreateArguments CreateArgumentsOf(const CommandLine& line) {
  compose::CreateArguments a;
  a.target_modules = line.Value("target-modules");
  a.target_regex = line.Value("target-regex");
  a.r = line.Value("r");
  a.alpha = line.Value("alpha");
  a.seed = line.Value("seed");
  a.rslora = line.Has("rslora");
  a.dora = line.Has("dora");
  a.init = line.Value("init");
  a.dtype = line.Value("dtype");
  return a;
}

std::optional<std::string> CreateUsageProblem(const CommandLine& line) {
  if (!line.Has("out") && !line.Has("dry-run")) return "-o/--out is required (or --dry-run)";
  auto parsed = compose::ParseCreateArguments(CreateArgumentsOf(line));
  if (!parsed.ok()) return parsed.error().message;
  return std::nullopt;
}

CreateBaseName CreateBaseNameOf(std::string_view base) {
  if (base.starts_with("hf://")) {
    std::string_view rest = base.substr(5);
    std::optional<std::string> revision;
    if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
      revision = std::string(rest.substr(at + 1));
      rest = rest.substr(0, at);
    }
    while (rest.ends_with("/")) rest.remove_suffix(1);
    return {std::string(rest), revision};
  }
  return {std::string(base), std::nullopt};
}

std::string_view CreateHelpIntro() {
  return "usage: peft-bridge create --base PATH|hf://REPO -o|--out DIR --target-modules NAMES|all-linear\n"
         "       [--target-regex REGEX] [--r R] [--alpha A] [--rslora] [--dora] [--init kaiming|gaussian]\n"
         "       [--seed S] [--dtype bf16|f16|f32] [--dry-run] [--json] [--force] [--base-config FILE] [--arch NAME]\n"
         "       [--naming-table FILE]... [--follow-links]\n"
         "\n"
         "Writes a fresh LoRA adapter for a base model as PEFT's get_peft_model(model, LoraConfig(...)) makes it:\n"
         "lora_A from PEFT's init (kaiming: kaiming_uniform_(a=sqrt(5)), U(-1/sqrt(in), 1/sqrt(in)); gaussian:\n"
         "N(0, 1/r)), lora_B zero (so the model's outputs are the base's), DoRA's magnitude the base weight's row\n"
         "norms, and the adapter_config.json PEFT writes. The random numbers are peft-bridge's own (seeded,\n"
         "default seed 0): the same bytes on every machine and in the npm CLI, not torch's. PATH is the base's\n"
         "folder, its model.safetensors or index, or a remote repo (as merge --base): the layers and shapes come\n"
         "from the weights' headers; only DoRA reads weight data (streamed, one tensor at a time).\n"
         "\n"
         "options:\n";
}

std::string RenderCreatePlanText(const compose::CreatePlan& plan, bool dry_run) {
  const auto& o = plan.options;
  std::string out = std::string(dry_run ? "would create" : "create") + ": " + std::to_string(plan.modules.size()) +
                    " LoRA module(s), r=" + std::to_string(o.r) + ", alpha=" + AlphaText(o) +
                    (o.rslora ? " (rsLoRA)" : "") + (o.dora ? ", DoRA" : "") + ", " + InitName(plan) + " init, seed " +
                    std::to_string(o.seed) + ", " + std::string(DtypeName(o.dtype)) +
                    (plan.arch.empty() ? std::string() : ", arch " + plan.arch) + "\n";
  for (const auto& m : plan.modules)
    out += "  " + m.path + " [" + std::to_string(m.in_features) + " -> " + std::to_string(m.out_features) + "] " +
           std::string(adapter::ModuleKindName(m.kind)) + "\n";
  if (o.dora) out += "reads " + text::SizeText(plan.base_bytes) + " of base weights for the DoRA magnitudes\n";
  for (const auto& n : plan.notes) out += "note: " + n + "\n";
  if (dry_run)
    out += "would write: " + std::string(compose::kCreateWeightsName) + " (" + text::SizeText(plan.write.total_size()) +
           "), " + std::string(compose::kCreateConfigName) + "\n";
  return out;
}

std::string RenderCreateOutcomeText(const compose::CreatePlan& plan) {
  return "wrote: " + std::string(compose::kCreateWeightsName) + " (" + text::SizeText(plan.write.total_size()) + "), " +
         std::string(compose::kCreateConfigName) + "\n";
}

std::string RenderCreateJson(const compose::CreatePlan& plan, bool dry_run) {
  const auto& o = plan.options;
  nlohmann::ordered_json j;
  j["ok"] = true;
  j["dryRun"] = dry_run;
  j["arch"] = plan.arch.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(plan.arch);
  j["r"] = o.r;
  if (o.alpha_is_int) j["loraAlpha"] = int64_t(o.alpha);
  else j["loraAlpha"] = o.alpha;
  j["scaling"] = plan.modules.empty() ? 0.0 : plan.modules.front().scaling;
  j["useRslora"] = o.rslora;
  j["useDora"] = o.dora;
  j["init"] = InitName(plan);
  j["seed"] = o.seed;
  j["dtype"] = std::string(DtypeName(o.dtype));
  j["modules"] = nlohmann::ordered_json::array();
  for (const auto& m : plan.modules)
    j["modules"].push_back({{"path", m.path},
                            {"kind", std::string(adapter::ModuleKindName(m.kind))},
                            {"inFeatures", m.in_features},
                            {"outFeatures", m.out_features}});
  if (o.target_regex) j["targetModules"] = *o.target_regex;
  else j["targetModules"] = plan.target_modules;
  j["files"] = {{{"name", std::string(compose::kCreateWeightsName)}, {"bytes", plan.write.total_size()}},
                {{"name", std::string(compose::kCreateConfigName)}, {"bytes", plan.config_text.size()}}};
  j["baseBytesRead"] = plan.base_bytes;
  j["notes"] = plan.notes;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace pb::app
