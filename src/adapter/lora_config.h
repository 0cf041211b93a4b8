// adapter_config.json for LoRA, read with PEFT's meaning (docs/peft-semantics.md, "adapter_config.json").
//
// Every field of every PEFT release is understood, with PEFT's defaults for the ones a file leaves out.
// The document itself is kept (key order included, because rank_pattern / alpha_pattern are first-match
// in dict order) so a re-export writes back exactly the fields and values that were read.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/result.h"

namespace pb::adapter {

struct ConfigPatterns;  // module_select.h

// target_modules / exclude_modules: absent (null), a list of names (exact or dotted-suffix match), or one
// Python regex that must match the whole module name.
struct ModuleSelector {
  enum class Form { kNone, kList, kRegex };
  Form form = Form::kNone;
  std::vector<std::string> names;  // kList, in file order
  std::string regex;               // kRegex (also "all-linear", which is kept as written)
  bool is_all_linear() const;      // "all-linear", case-insensitive, as PEFT compares it
};

struct LoraConfig {
  Json document;  // the file as read (an object), untouched

  std::string peft_type = "LORA";
  std::optional<std::string> task_type;
  std::optional<std::string> base_model_name_or_path;
  std::optional<std::string> revision;
  std::optional<std::string> peft_version;
  int64_t r = 8;
  double lora_alpha = 8;  // the JSON may hold an int or a float; document keeps which
  double lora_dropout = 0.0;
  bool fan_in_fan_out = false;
  std::string bias = "none";  // none | all | lora_only
  bool use_rslora = false;
  bool use_dora = false;
  bool lora_bias = false;
  ModuleSelector target_modules;
  ModuleSelector exclude_modules;
  std::vector<std::string> modules_to_save;  // empty when null
  // Parameters wrapped by PEFT's ParamWrapper (MoE experts' fused 3-D weights), as written: each entry matches
  // a parameter whose dotted path is the entry or ends with "." + entry (tuners_utils _inject_parameters).
  std::vector<std::string> target_parameters;                 // empty when null
  std::vector<int64_t> layers_to_transform;                   // empty when null; an int becomes [int]
  std::vector<std::string> layers_pattern;                    // empty when null; a string becomes [s]
  std::vector<std::pair<std::string, int64_t>> rank_pattern;  // in file order
  std::vector<std::pair<std::string, double>> alpha_pattern;  // in file order
  std::string init_lora_weights = "true";                     // "true", "false" or the mode string
  std::optional<Json> trainable_token_indices;                // kept as written
  std::optional<Json> layer_replication;
  // The regexes above, compiled once by ParseLoraConfig (CompileConfigPatterns in module_select.h).
  std::shared_ptr<const ConfigPatterns> patterns;

  // Keys no PEFT release defines (kept in `document`, reported by adapter-info, never fatal).
  std::vector<std::string> unknown_keys;
  // Keys whose value is ignored when applying an adapter (training-only settings), for reports.
  // Not errors; listed so adapter-info can say what was read but has no effect on the weights.
};

// Parses adapter_config.json text.
// Errors:
//   InvalidConfig      not JSON, not an object, a known field of the wrong type (message names the field
//                      and the type found), r <= 0, an invalid task_type, bias not one of the three values,
//                      a Python regex peft-bridge cannot translate (message names the construct), or one of
//                      LoraConfig.__post_init__'s contradictions (regex target_modules with
//                      layers_to_transform, layers_pattern without layers_to_transform, lora_bias with
//                      use_dora, target_parameters with use_dora / lora_bias / fan_in_fan_out / lora_dropout != 0...).
//   UnsupportedAdapter peft_type other than LORA (message names it: LOHA, LOKR, IA3, ADALORA...);
//                      init_lora_weights that rewrite base weights at load (pissa*, olora, corda, loftq,
//                      lora_ga, mica); LoRA variants peft-bridge cannot merge (alora_invocation_tokens,
//                      use_bdlora, arrow_config, monteclora_config, kasa_config, use_qalora,
//                      layer_replication, megatron_config). Each message says
//                      which field and why (e.g. "init_lora_weights=\"pissa\" rewrites the base weights
//                      when PEFT loads the adapter; convert it with PEFT's
//                      path_initial_model_for_weight_conversion first").
Result<LoraConfig> ParseLoraConfig(std::string_view json_text);

// The PEFT release whose LoraConfig DefaultLoraConfigDocument reproduces (the golden corpus's pin,
// requirements-golden.txt; tests/golden/check_configs.py compares with that release's save_pretrained).
inline constexpr std::string_view kPeftSchemaVersion = "0.21.2";

// The LoraConfig fields of PEFT kPeftSchemaVersion with their default values, in sorted key order, as that
// release writes a fresh config: peft_version included, which PEFT fills with its own version whenever it is
// unset. Used to write configs for adapters that came from another format.
Json DefaultLoraConfigDocument();

// The task heads PEFT adds to modules_to_save on its own for a task_type (peft_model.py's
// classifier_module_names / qa_module_names): classifier and score for SEQ_CLS and TOKEN_CLS, qa_outputs for
// QUESTION_ANS, none otherwise.
std::vector<std::string> TaskHeadModules(std::string_view task_type);

// Field names PEFT releases before 0.14 accept (LoraConfig.__init__ rejects any other key there).
bool IsPre014LoraField(std::string_view key);

}  // namespace pb::adapter
