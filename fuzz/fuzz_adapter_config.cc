// libFuzzer target for adapter_config.json: ParseLoraConfig, pattern resolution, and the write-back.
//
// Input: part 0 = the config text; part 1 (optional) = module names, one per line. Without part 1 the names
// are derived from the config itself: every string of target_modules, exclude_modules, modules_to_save and
// the rank/alpha pattern keys, each alone and under "model.layers.3." / with ".x" appended, plus a few
// typical module paths. The compact encoding (fuzz_input.h) is expanded first.
//
// Checks (abort() on failure):
//   - a rejected config is InvalidConfig or UnsupportedAdapter with a message;
//   - for every name, ResolveModuleSettings's scaling is alpha / r (or alpha / sqrt(r) with use_rslora), a
//     pattern key it reports is one of the config's, and IsTargeted answers without crashing;
//   - write-back: DumpPythonJson(document) with the key order kept re-parses to an equal document and equal
//     fields, and with sort_keys (what PEFT writes) re-parses and dumps to the same text again.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "adapter/lora_config.h"
#include "adapter/module_select.h"
#include "text/python_json.h"
#include "fuzz_input.h"
#include "json_mutator.h"

namespace {

using pb::adapter::LoraConfig;
using pb::adapter::ModuleSelector;

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_adapter_config: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

std::string Render(const ModuleSelector& m) {
  std::string s = std::to_string(static_cast<int>(m.form)) + "[" + m.regex + "]";
  for (const auto& n : m.names) s += std::to_string(n.size()) + ":" + n;
  return s;
}

std::string Num(double v) { return pb::text::PythonFloatRepr(v); }

// Every field ParseLoraConfig derives, so that two parses can be compared.
std::string Render(const LoraConfig& c) {
  auto opt = [](const std::optional<std::string>& s) { return s ? "\"" + *s + "\"" : std::string("-"); };
  std::string s = c.peft_type + "|" + opt(c.task_type) + "|" + opt(c.base_model_name_or_path) + "|" + opt(c.revision) +
                  "|" + opt(c.peft_version) + "|r=" + std::to_string(c.r) + "|alpha=" + Num(c.lora_alpha) +
                  "|dropout=" + Num(c.lora_dropout) + "|" + std::to_string(c.fan_in_fan_out) + c.bias +
                  std::to_string(c.use_rslora) + std::to_string(c.use_dora) + std::to_string(c.lora_bias) +
                  "|t=" + Render(c.target_modules) + "|x=" + Render(c.exclude_modules) + "|save=";
  for (const auto& m : c.modules_to_save) s += m + ",";
  s += "|layers=";
  for (auto l : c.layers_to_transform) s += std::to_string(l) + ",";
  s += "|lp=";
  for (const auto& l : c.layers_pattern) s += l + ",";
  s += "|rp=";
  for (const auto& [k, v] : c.rank_pattern) s += k + "=" + std::to_string(v) + ",";
  s += "|ap=";
  for (const auto& [k, v] : c.alpha_pattern) s += k + "=" + Num(v) + ",";
  s += "|init=" + c.init_lora_weights + "|unknown=";
  for (const auto& k : c.unknown_keys) s += k + ",";
  return s;
}

std::vector<std::string> DerivedNames(const LoraConfig& c) {
  std::vector<std::string> seeds = c.target_modules.names;
  seeds.insert(seeds.end(), c.exclude_modules.names.begin(), c.exclude_modules.names.end());
  seeds.insert(seeds.end(), c.modules_to_save.begin(), c.modules_to_save.end());
  for (const auto& [k, v] : c.rank_pattern) seeds.push_back(k);
  for (const auto& [k, v] : c.alpha_pattern) seeds.push_back(k);
  std::vector<std::string> names = {"model.layers.0.self_attn.q_proj",
                                    "model.layers.12.mlp.down_proj",
                                    "q_proj",
                                    "transformer.h.3.attn.c_attn",
                                    "lm_head",
                                    ""};
  for (const auto& s : seeds) {
    if (names.size() >= 64) break;
    names.push_back(s);
    names.push_back("model.layers.3." + s);
    names.push_back(s + ".x");
  }
  return names;
}

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty() && out.size() < 64) {
    size_t nl = text.find('\n');
    out.emplace_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

void CheckSettings(const LoraConfig& c, const std::string& name) {
  (void)pb::adapter::IsTargeted(c, name);
  auto s = pb::adapter::ResolveModuleSettings(c, name);
  double r = static_cast<double>(s.r);
  double want = c.use_rslora ? s.alpha / std::sqrt(r) : s.alpha / r;
  if (!(s.scaling == want || (std::isnan(s.scaling) && std::isnan(want))))
    Fail("scaling is not alpha / r", name + ": " + Num(s.scaling) + " vs " + Num(want));
  if (s.rank_pattern_key) {
    bool found = false;
    for (const auto& [k, v] : c.rank_pattern) found = found || (k == *s.rank_pattern_key && v == s.r);
    if (!found) Fail("rank_pattern_key is not a key of rank_pattern with that r", *s.rank_pattern_key);
  } else if (s.r != c.r) {
    Fail("r differs from the config's without a rank_pattern key", name);
  }
  if (s.alpha_pattern_key) {
    bool found = false;
    for (const auto& [k, v] : c.alpha_pattern) found = found || k == *s.alpha_pattern_key;
    if (!found) Fail("alpha_pattern_key is not a key of alpha_pattern", *s.alpha_pattern_key);
  } else if (!(s.alpha == c.lora_alpha)) {
    Fail("alpha differs from lora_alpha without an alpha_pattern key", name);
  }
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {"peft_type",
     "task_type",
     "r",
     "lora_alpha",
     "lora_dropout",
     "target_modules",
     "exclude_modules",
     "modules_to_save",
     "layers_to_transform",
     "layers_pattern",
     "rank_pattern",
     "alpha_pattern",
     "use_rslora",
     "use_dora",
     "fan_in_fan_out",
     "bias",
     "lora_bias",
     "init_lora_weights",
     "base_model_name_or_path",
     "revision",
     "peft_version",
     "trainable_token_indices",
     "layer_replication",
     "target_parameters",
     "megatron_config",
     "alora_invocation_tokens",
     "inference_mode",
     "auto_mapping"},
    {"LORA",        "LOHA",       "CAUSAL_LM",    "SEQ_CLS",  "all-linear", "ALL-LINEAR",
     "none",        "all",        "lora_only",    "q_proj",   "v_proj",     "model.layers.0.self_attn.q_proj",
     ".*\\.q_proj", "(a+)+$",     "^model\\..*",  "layers",   "h",          "pissa",
     "gaussian",    "(?i)Q_PROJ", "layers.0.mlp", "(?P<x>a)", "[a-z]+",     "x{2,5}",
     "\\d+",        "\\A"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 2);
  const std::string text(parts[0]);
  auto parsed = pb::adapter::ParseLoraConfig(text);
  if (!parsed.ok()) {
    auto code = parsed.error().code;
    if (code != pb::ErrorCode::InvalidConfig && code != pb::ErrorCode::UnsupportedAdapter)
      Fail("unexpected error code", std::string(pb::ErrorCodeName(code)) + ": " + parsed.error().message);
    if (parsed.error().message.empty()) Fail("error without a message");
    return 0;
  }
  const LoraConfig& config = parsed.value();

  if (config.patterns == nullptr) Fail("an accepted config has no compiled patterns");
  const std::vector<std::string> names = parts.size() > 1 ? Lines(parts[1]) : DerivedNames(config);
  for (const auto& name : names) CheckSettings(config, name);

  // Write-back, key order kept: the same document and the same fields.
  const std::string kept = pb::text::DumpPythonJson(config.document, {.indent = 2, .sort_keys = false});
  auto again = pb::adapter::ParseLoraConfig(kept);
  if (!again.ok()) Fail("the written-back config does not re-parse: " + again.error().message, kept);
  if (again->document != config.document) Fail("write-back changed the document", kept);
  if (Render(again.value()) != Render(config))
    Fail("write-back changed the fields", Render(config) + "\n" + Render(again.value()));

  // As PEFT writes it (sorted keys): re-parses, and is a fixed point.
  const std::string sorted = pb::text::DumpPythonJson(config.document);
  auto sorted_again = pb::adapter::ParseLoraConfig(sorted);
  if (!sorted_again.ok()) Fail("the sorted write-back does not re-parse: " + sorted_again.error().message, sorted);
  if (pb::text::DumpPythonJson(sorted_again->document) != sorted)
    Fail("sorted write-back is not a fixed point", sorted);
  return 0;
}
