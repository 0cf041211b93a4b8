#include "adapter/lora_config.h"
#include "text/python_json.h"

#include <algorithm>
#include <array>
#include <limits>

#include "adapter/module_select.h"

namespace pb::adapter {

bool ModuleSelector::is_all_linear() const {
  if (form != Form::kRegex || regex.size() != 10) return false;
  std::string lower = regex;
  for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return lower == "all-linear";
}

namespace {

// Every key some PEFT release's LoraConfig or PeftConfig defines (first release in the comment).
constexpr std::array<std::string_view, 45> kKnownKeys = {
    // PeftConfig / PeftConfigMixin
    "peft_type", "task_type", "base_model_name_or_path", "inference_mode",  // 0.1
    "auto_mapping", "revision",                                             // 0.4
    "peft_version",                                                         // 0.18
    // LoraConfig
    "r", "target_modules", "lora_alpha", "lora_dropout", "fan_in_fan_out", "bias",    // 0.0.1
    "merge_weights", "enable_lora",                                                   // 0.0.1 - 0.2 only
    "modules_to_save", "init_lora_weights", "layers_to_transform", "layers_pattern",  // 0.1 - 0.4
    "rank_pattern", "alpha_pattern",                                                  // 0.6
    "megatron_config", "megatron_core", "loftq_config",                               // 0.7
    "use_rslora", "use_dora", "layer_replication", "runtime_config",                  // 0.8 - 0.12
    "exclude_modules", "eva_config", "lora_bias",                                     // 0.14
    "trainable_token_indices", "corda_config",                                        // 0.15
    "use_qalora", "qalora_group_size",                                                // 0.16
    "target_parameters",                                                              // 0.17
    "alora_invocation_tokens", "arrow_config", "ensure_weight_tying",                 // 0.18
    "lora_ga_config", "use_bdlora",                                                   // 0.19
    "velora_config", "monteclora_config",                                             // 0.20
    "kasa_config",                                                                    // after 0.20
};

// The keyword arguments PEFT 0.13's LoraConfig.__init__ takes (any other key is a TypeError there).
constexpr std::array<std::string_view, 25> kPre014Keys = {
    // PeftConfig
    "peft_type", "task_type", "base_model_name_or_path", "inference_mode", "auto_mapping", "revision",
    // LoraConfig
    "r", "target_modules", "lora_alpha", "lora_dropout", "fan_in_fan_out", "bias", "modules_to_save",
    "init_lora_weights", "layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern", "megatron_config",
    "megatron_core", "loftq_config", "use_rslora", "use_dora", "layer_replication",
    "runtime_config",  // 0.12
};

constexpr std::array<std::string_view, 6> kTaskTypes = {"SEQ_CLS",   "SEQ_2_SEQ_LM", "CAUSAL_LM",
                                                        "TOKEN_CLS", "QUESTION_ANS", "FEATURE_EXTRACTION"};

template <size_t N>
bool Contains(const std::array<std::string_view, N>& set, std::string_view key) {
  return std::find(set.begin(), set.end(), key) != set.end();
}

Error Invalid(const std::string& message) {
  return MakeError(ErrorCode::InvalidConfig, "adapter_config.json: " + message);
}
Error Unsupported(const std::string& message) {
  return MakeError(ErrorCode::UnsupportedAdapter, "adapter_config.json: " + message);
}

std::string Dump(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

// -1, "8", [1, 2] (long values shortened).
std::string Describe(const Json& v) {
  std::string text = Dump(v);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}
std::string Found(const Json& v) { return "found " + Describe(v); }

// Python truthiness, which is how PEFT decides whether most optional features are on.
bool Truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();
}

bool FitsInt64(const Json& v) {
  return v.is_number_integer() &&
         (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

// Reads the known fields into a LoraConfig, keeping the first type error. Absent keys (and null, where
// PEFT's default is None or null behaves like the default) keep the struct's defaults, which are PEFT's.
class FieldReader {
 public:
  explicit FieldReader(const Json& doc) : doc_(doc) {}
  const std::optional<Error>& error() const { return error_; }

  const Json* Get(const char* key) const {
    auto it = doc_.find(key);
    return it == doc_.end() ? nullptr : &*it;
  }
  // Present and not null.
  const Json* Value(const char* key) const {
    const Json* v = Get(key);
    return v && !v->is_null() ? v : nullptr;
  }

  void Fail(const char* key, const std::string& must, const Json& v) {
    if (!error_) error_ = Invalid(std::string("`") + key + "` must be " + must + ", " + Found(v));
  }

  void Bool(const char* key, bool& out) {
    if (const Json* v = Value(key)) {
      if (v->is_boolean()) out = v->get<bool>();
      else Fail(key, "true or false", *v);
    }
  }
  void OptString(const char* key, std::optional<std::string>& out) {
    if (const Json* v = Value(key)) {
      if (v->is_string()) out = v->get<std::string>();
      else Fail(key, "a string or null", *v);
    }
  }
  void Number(const char* key, double& out, bool null_ok) {
    const Json* v = Get(key);
    if (!v || (null_ok && v->is_null())) return;
    if (v->is_number()) out = v->get<double>();
    else Fail(key, "a number", *v);
  }
  bool StringList(const char* key, const Json& v, std::vector<std::string>& out) {
    for (const Json& item : v) {
      if (!item.is_string()) {
        Fail(key, "a list of strings", item);
        return false;
      }
      out.push_back(item.get<std::string>());
    }
    return true;
  }
  void Selector(const char* key, ModuleSelector& out) {
    if (const Json* v = Value(key)) {
      if (v->is_string()) {
        out.form = ModuleSelector::Form::kRegex;
        out.regex = v->get<std::string>();
      } else if (v->is_array()) {
        out.form = ModuleSelector::Form::kList;
        StringList(key, *v, out.names);
      } else {
        Fail(key, "a list of module names, a regex string or null", *v);
      }
    }
  }

  void Rank() {
    const Json* v = Get("r");
    if (!v) return;
    if (FitsInt64(*v) && v->get<int64_t>() >= 1) out_r_ = v->get<int64_t>();
    else Fail("r", "a positive integer", *v);
  }
  int64_t r() const { return out_r_; }

 private:
  const Json& doc_;
  std::optional<Error> error_;
  int64_t out_r_ = 8;
};

void ReadLayersAndPatterns(FieldReader& in, LoraConfig& c) {
  if (const Json* v = in.Value("layers_to_transform")) {
    if (FitsInt64(*v)) {
      c.layers_to_transform.push_back(v->get<int64_t>());
    } else if (v->is_array()) {
      for (const Json& item : *v) {
        if (!FitsInt64(item)) return in.Fail("layers_to_transform", "an integer or a list of integers", item);
        c.layers_to_transform.push_back(item.get<int64_t>());
      }
    } else {
      return in.Fail("layers_to_transform", "an integer or a list of integers", *v);
    }
  }
  if (const Json* v = in.Value("layers_pattern")) {
    // PEFT tests len(layers_pattern) == 0, so "" means "any layer pattern" like null; [""] is a real pattern.
    if (v->is_string()) {
      if (!v->get_ref<const std::string&>().empty()) c.layers_pattern.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (!in.StringList("layers_pattern", *v, c.layers_pattern)) return;
    } else {
      return in.Fail("layers_pattern", "a string, a list of strings or null", *v);
    }
  }
  if (const Json* v = in.Get("rank_pattern")) {
    if (!v->is_object()) return in.Fail("rank_pattern", "an object of module patterns to ranks", *v);
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!FitsInt64(it.value()) || it.value().get<int64_t>() < 1)
        return in.Fail("rank_pattern", "an object whose values are positive integers", it.value());
      c.rank_pattern.emplace_back(it.key(), it.value().get<int64_t>());
    }
  }
  if (const Json* v = in.Get("alpha_pattern")) {
    if (!v->is_object()) return in.Fail("alpha_pattern", "an object of module patterns to alphas", *v);
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!it.value().is_number()) return in.Fail("alpha_pattern", "an object whose values are numbers", it.value());
      c.alpha_pattern.emplace_back(it.key(), it.value().get<double>());
    }
  }
}

void ReadFields(FieldReader& in, LoraConfig& c) {
  in.OptString("task_type", c.task_type);
  in.OptString("base_model_name_or_path", c.base_model_name_or_path);
  in.OptString("revision", c.revision);
  in.OptString("peft_version", c.peft_version);
  in.Rank();
  c.r = in.r();
  in.Number("lora_alpha", c.lora_alpha, /*null_ok=*/false);  // None / r fails in PEFT
  in.Number("lora_dropout", c.lora_dropout, /*null_ok=*/true);
  in.Bool("fan_in_fan_out", c.fan_in_fan_out);
  in.Bool("use_rslora", c.use_rslora);
  in.Bool("use_dora", c.use_dora);
  in.Bool("lora_bias", c.lora_bias);
  bool flag = false;
  for (const char* key : {"use_qalora", "ensure_weight_tying"}) in.Bool(key, flag);  // checked, kept in document
  if (const Json* v = in.Get("bias")) {
    if (!v->is_string() || (*v != "none" && *v != "all" && *v != "lora_only"))
      in.Fail("bias", "\"none\", \"all\" or \"lora_only\"", *v);
    else c.bias = v->get<std::string>();
  }
  in.Selector("target_modules", c.target_modules);
  in.Selector("exclude_modules", c.exclude_modules);
  if (const Json* v = in.Value("modules_to_save")) {
    if (v->is_array()) in.StringList("modules_to_save", *v, c.modules_to_save);
    else in.Fail("modules_to_save", "a list of module names or null", *v);
  }
  ReadLayersAndPatterns(in, c);
  if (const Json* v = in.Get("init_lora_weights")) {
    if (v->is_boolean()) c.init_lora_weights = v->get<bool>() ? "true" : "false";
    else if (v->is_string()) c.init_lora_weights = v->get<std::string>();
    else in.Fail("init_lora_weights", "true, false or an initialisation name", *v);
  }
  if (const Json* v = in.Value("trainable_token_indices")) {
    if (v->is_array() || v->is_object()) c.trainable_token_indices = *v;
    else in.Fail("trainable_token_indices", "a list of token ids, an object of lists or null", *v);
  }
  if (const Json* v = in.Value("layer_replication")) c.layer_replication = *v;
  for (const char* key : {"velora_config", "kasa_config"})  // __post_init__: "must be a ... dict, or None"
    if (const Json* v = in.Value(key); v && !v->is_object()) in.Fail(key, "an object or null", *v);
  if (const Json* v = in.Value("target_parameters")) {
    if (v->is_array()) in.StringList("target_parameters", *v, c.target_parameters);
    else in.Fail("target_parameters", "a list of strings or null", *v);
  }
}

std::optional<Error> CheckPostInit(const FieldReader& in, const LoraConfig& c) {
  if (c.task_type && !Contains(kTaskTypes, *c.task_type))
    return Invalid("invalid `task_type` \"" + *c.task_type +
                   "\"; must be null or one of SEQ_CLS, SEQ_2_SEQ_LM, CAUSAL_LM, TOKEN_CLS, QUESTION_ANS, "
                   "FEATURE_EXTRACTION");
  bool regex_targets = c.target_modules.form == ModuleSelector::Form::kRegex;
  if (regex_targets && in.Value("layers_to_transform"))
    return Invalid("`layers_to_transform` cannot be used when `target_modules` is a regex string");
  if (regex_targets && in.Value("layers_pattern"))
    return Invalid("`layers_pattern` cannot be used when `target_modules` is a regex string");
  if (const Json* v = in.Get("layers_pattern"); v && Truthy(*v) && !in.Value("layers_to_transform"))
    return Invalid("`layers_pattern` requires `layers_to_transform`");
  const Json* megatron = in.Get("megatron_config");
  if (c.use_dora && megatron && Truthy(*megatron))
    return Invalid("`use_dora` cannot be combined with `megatron_config`");
  const Json* loftq = in.Get("loftq_config");
  if (c.init_lora_weights == "loftq" && !(loftq && Truthy(*loftq)))
    return Invalid("`init_lora_weights` \"loftq\" requires a `loftq_config`");
  if (c.lora_bias && c.init_lora_weights != "true" && c.init_lora_weights != "false")
    return Invalid("`lora_bias` requires `init_lora_weights` true or false, found \"" + c.init_lora_weights + "\"");
  if (c.lora_bias && c.use_dora) return Invalid("`lora_bias` cannot be combined with `use_dora`");
  // PEFT's lora.ParamWrapper (the layer target_parameters creates) raises these in its constructor, so PEFT
  // cannot load such an adapter at all.
  if (!c.target_parameters.empty()) {
    const char* why = c.use_dora            ? "use_dora"
                      : c.lora_bias         ? "lora_bias"
                      : c.fan_in_fan_out    ? "fan_in_fan_out"
                      : c.lora_dropout != 0 ? "lora_dropout"
                                            : nullptr;
    if (why)
      return Invalid(std::string("`target_parameters` cannot be combined with `") + why +
                     "`: PEFT's ParamWrapper refuses it (use_dora, lora_bias, fan_in_fan_out and lora_dropout != 0 "
                     "do not work on parameters)");
  }
  return std::nullopt;
}

bool IsPissaMode(const std::string& mode) {  // pissa_init: "pissa" or anything with one "_niter_<int>"
  if (mode == "pissa") return true;
  size_t at = mode.find("_niter_");
  if (at == std::string::npos || mode.find("_niter_", at + 1) != std::string::npos) return false;
  std::string_view n = std::string_view(mode).substr(at + 7);
  if (!n.empty() && (n[0] == '+' || n[0] == '-')) n.remove_prefix(1);
  return !n.empty() && std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::string Lower(std::string s) {
  for (char& ch : s) ch = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  return s;
}

// init_lora_weights as LoraLayer.update_layer reads it: some modes only initialise A and B (harmless for
// a trained adapter), others rewrite the base weight at load time or select a different layer.
std::optional<Error> CheckInitMode(const std::string& mode) {
  if (mode == "true" || mode == "false" || mode.empty() || mode == "eva" || mode == "orthogonal" ||
      Lower(mode) == "gaussian")
    return std::nullopt;
  const std::string field = "init_lora_weights=\"" + mode + "\" ";
  const std::string rewrites = field + "rewrites the base weights when PEFT loads the adapter; convert it with PEFT's "
                                       "path_initial_model_for_weight_conversion first";
  if (mode.starts_with("pissa")) {
    if (!IsPissaMode(mode))
      return Invalid("`init_lora_weights` must be \"pissa\" or \"pissa_niter_<n>\", found \"" + mode + "\"");
    return Unsupported(rewrites);
  }
  if (mode.starts_with("corda") || Lower(mode) == "olora" || mode == "lora_ga") return Unsupported(rewrites);
  if (mode == "loftq")
    return Unsupported(field + "replaces the base weights with their LoftQ quantisation when PEFT loads the adapter");
  if (Lower(mode) == "mica")
    return Unsupported(field + "selects the MiCA variant, whose forward and merge differ from LoRA");
  return Invalid("unknown `init_lora_weights` \"" + mode + "\"");
}

struct Variant {
  const char* key;
  bool when_not_null;  // configs PEFT turns into dataclass objects are on whenever present
  const char* why;
};
constexpr std::array<Variant, 9> kVariants = {{
    {"enable_lora", false, "uses PEFT <= 0.2's MergedLinear layout (LoRA on part of a fused projection)"},
    {"layer_replication", false, "duplicates base-model layers before injection (PEFT refuses to merge these too)"},
    {"megatron_config", false, "targets Megatron-LM parallel layers"},
    {"use_qalora", false, "selects QA-LoRA, whose lora_A acts on group-pooled inputs"},
    {"alora_invocation_tokens", false,
     "selects activated LoRA, which applies only after the invocation tokens and cannot be merged"},
    {"arrow_config", false, "selects Arrow routing between several LoRA experts"},
    {"use_bdlora", false, "selects block-diagonal LoRA"},
    {"monteclora_config", true, "selects the MonteCLoRA variant"},
    {"kasa_config", true, "selects KaSA, which truncates the base weights' singular values at injection"},
}};

std::optional<Error> CheckSupported(const FieldReader& in, const LoraConfig& c) {
  if (auto e = CheckInitMode(c.init_lora_weights)) return e;
  for (const Variant& v : kVariants) {
    const Json* value = in.Get(v.key);
    if (value && (v.when_not_null ? !value->is_null() : Truthy(*value)))
      return Unsupported(std::string("`") + v.key + "` = " + Describe(*value) + ": " + v.why +
                         "; peft-bridge merges plain LoRA and DoRA only");
  }
  return std::nullopt;
}

}  // namespace

Result<LoraConfig> ParseLoraConfig(std::string_view json_text) {
  LoraConfig c;
  auto parsed = ParseJson(json_text, "adapter_config.json");  // refuses deep nesting before building anything
  if (!parsed.ok()) return parsed.error();
  c.document = std::move(parsed.value());
  if (!c.document.is_object()) return Invalid("must be a JSON object, " + Found(c.document));
  FieldReader in(c.document);

  const Json* type = in.Get("peft_type");
  if (!type) return Invalid("`peft_type` is required");
  if (!type->is_string()) return Invalid("`peft_type` must be a string, " + Found(*type));
  std::string peft_type = type->get<std::string>();
  if (peft_type != "LORA") {
    if (Lower(peft_type) == "lora" || peft_type.empty())
      return Invalid("`peft_type` must be \"LORA\", found \"" + peft_type + "\"");
    return Unsupported(peft_type + " adapters are not supported yet; only LORA");
  }

  ReadFields(in, c);
  if (in.error()) return *in.error();
  if (auto e = CheckPostInit(in, c)) return *e;
  if (auto e = CheckSupported(in, c)) return *e;
  for (auto it = c.document.begin(); it != c.document.end(); ++it)
    if (!Contains(kKnownKeys, it.key())) c.unknown_keys.push_back(it.key());
  PB_RETURN_IF_ERROR(CompileConfigPatterns(c));
  return c;
}

std::vector<std::string> TaskHeadModules(std::string_view task_type) {
  if (task_type == "SEQ_CLS" || task_type == "TOKEN_CLS") return {"classifier", "score"};
  if (task_type == "QUESTION_ANS") return {"qa_outputs"};
  return {};
}

Json DefaultLoraConfigDocument() {
  // PEFT kPeftSchemaVersion's LoraConfig as save_pretrained writes a fresh one: json.dumps(..., sort_keys=True).
  Json d = Json::object();
  Json null;
  d["alora_invocation_tokens"] = null;
  d["alpha_pattern"] = Json::object();
  d["arrow_config"] = null;
  d["auto_mapping"] = null;
  d["base_model_name_or_path"] = null;
  d["bias"] = "none";
  d["corda_config"] = null;
  d["ensure_weight_tying"] = false;
  d["eva_config"] = null;
  d["exclude_modules"] = null;
  d["fan_in_fan_out"] = false;
  d["inference_mode"] = true;  // PEFT always saves true
  d["init_lora_weights"] = true;
  d["kasa_config"] = null;
  d["layer_replication"] = null;
  d["layers_pattern"] = null;
  d["layers_to_transform"] = null;
  d["loftq_config"] = Json::object();
  d["lora_alpha"] = 8;
  d["lora_bias"] = false;
  d["lora_dropout"] = 0.0;
  d["lora_ga_config"] = null;
  d["megatron_config"] = null;
  d["megatron_core"] = "megatron.core";
  d["modules_to_save"] = null;
  d["monteclora_config"] = null;
  d["peft_type"] = "LORA";
  d["peft_version"] = std::string(kPeftSchemaVersion);  // PEFT's __post_init__ fills an unset one with its own
  d["qalora_group_size"] = 16;
  d["r"] = 8;
  d["rank_pattern"] = Json::object();
  d["revision"] = null;
  d["target_modules"] = null;
  d["target_parameters"] = null;
  d["task_type"] = null;
  d["trainable_token_indices"] = null;
  d["use_bdlora"] = null;
  d["use_dora"] = false;
  d["use_qalora"] = false;
  d["use_rslora"] = false;
  d["velora_config"] = null;
  return d;
}

bool IsPre014LoraField(std::string_view key) { return Contains(kPre014Keys, key); }

}  // namespace pb::adapter
