#include "compose/create_plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "adapter/lora_config.h"
#include "adapter/module_select.h"
#include "compose/model_modules.h"
#include "compose/option_text.h"
#include "adapter/natural_order.h"
#include "text/python_json.h"
#include "core/dtype_vocabulary.h"
#include "core/json.h"
#include "core/utf8.h"

namespace pb::compose {
namespace {

using adapter::ModuleKind;

Error Invalid(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string Quoted(std::string_view s) { return "`" + ClipForMessage(s) + "`"; }

std::vector<std::string> Split(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.emplace_back(item);
    start = comma + 1;
  }
  return out;
}

// Where transformers defines the class PEFT's auto_mapping names ("transformers.models.llama.modeling_llama"):
// the model_type's module; the text-only half of a multimodal family in the family's (gemma3_text in gemma3);
// a class of another family (internlm3's LlamaForCausalLM) in that family's, when the class name's prefix is a
// model_type the naming tables know. Checked against transformers on the golden corpus (check_create.py).
std::string ParentLibrary(std::string model_type, std::string_view class_name, const adapter::NamingTables& tables) {
  if (model_type == "openai-gpt") model_type = "openai";
  std::replace(model_type.begin(), model_type.end(), '-', '_');
  if (model_type.size() > 5 && model_type.ends_with("_text")) model_type.resize(model_type.size() - 5);
  size_t cut = std::min({class_name.find("For"), class_name.find("LMHead"), class_name.find("Model")});
  std::string prefix(class_name.substr(0, cut));
  std::transform(prefix.begin(), prefix.end(), prefix.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  std::string squeezed;
  for (char c : model_type)
    if (c != '_') squeezed += c;
  if (!prefix.empty() && prefix != squeezed && prefix != model_type)
    for (const auto& arch : tables.arches())
      if (std::find(arch.model_types.begin(), arch.model_types.end(), prefix) != arch.model_types.end()) {
        model_type = prefix;
        break;
      }
  return "transformers.models." + model_type + ".modeling_" + model_type;
}

}  // namespace

Result<CreateOptions> ParseCreateArguments(const CreateArguments& args) {
  CreateOptions o;
  if (args.target_modules && args.target_regex) return Invalid("give --target-modules or --target-regex, not both");
  if (!args.target_modules && !args.target_regex) return Invalid("--target-modules (or --target-regex) is required");
  if (args.target_regex) {
    if (args.target_regex->empty()) return Invalid("--target-regex is empty");
    o.target_regex = *args.target_regex;
  } else {
    for (auto& name : Split(*args.target_modules)) {
      if (name.empty())
        return Invalid("--target-modules has an empty module name (`" + ClipForMessage(*args.target_modules) + "`)");
      std::string lower = name;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
      if (lower == "all-linear") {
        o.all_linear = true;
        continue;
      }
      if (std::find(o.target_names.begin(), o.target_names.end(), name) == o.target_names.end())
        o.target_names.push_back(name);
    }
    if (o.all_linear && !o.target_names.empty())
      return Invalid("--target-modules: all-linear cannot be combined with module names");
  }
  if (args.r) {
    auto r = PositiveInteger(*args.r);
    if (!r) return Invalid("--r must be a positive integer (got " + Quoted(*args.r) + ")");
    o.r = int64_t(*r);
  }
  if (args.alpha) {
    const std::string& t = *args.alpha;
    if (AllDigits(t)) {
      int64_t a = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), a);
      if (ec != std::errc() || end != t.data() + t.size() || a <= 0 || a > (int64_t(1) << 53))
        return Invalid("--alpha must be a positive number (got " + Quoted(t) + ")");
      o.alpha = double(a);
      o.alpha_is_int = true;
    } else {
      auto a = PositiveDecimal(t);
      if (!a) return Invalid("--alpha must be a positive number (got " + Quoted(t) + ")");
      o.alpha = *a;
      o.alpha_is_int = false;
    }
  }
  if (args.seed) {
    const auto& t = *args.seed;
    uint64_t seed = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), seed);
    if (!AllDigits(t) || ec != std::errc() || end != t.data() + t.size())
      return Invalid("--seed must be an integer from 0 to 18446744073709551615 (got " + Quoted(t) + ")");
    o.seed = seed;
  }
  o.rslora = args.rslora;
  o.dora = args.dora;
  if (args.init) {
    if (*args.init == "gaussian") o.init = CreateInit::kGaussian;
    else if (*args.init == "kaiming") o.init = CreateInit::kKaiming;
    else return Invalid("unknown init " + Quoted(*args.init) + " (expected kaiming or gaussian)");
  }
  if (args.dtype) {
    auto dtype = ParseFloatDtypeOption(*args.dtype);
    if (!dtype.ok()) return dtype.error();
    o.dtype = dtype.value();
  }
  return o;
}

std::optional<Error> RefuseConfigAsBase(std::string_view base) {
  std::string_view name = base.substr(base.rfind('/') == std::string_view::npos ? 0 : base.rfind('/') + 1);
  if (!name.ends_with(".json") || name.ends_with(".index.json")) return std::nullopt;
  return Invalid("--base " + Quoted(base) +
                 " is a JSON file: create needs the base's weights for the layer shapes "
                 "(a config.json does not give them for every architecture, nor the norms DoRA starts from); "
                 "pass the model folder, its model.safetensors, its index or a hf:// repo");
}

Result<CreatePlan> PlanCreate(const std::vector<CreateShard>& shards, const std::optional<std::string>& base_config,
                              CreateOptions options) {
  CreatePlan plan;
  const adapter::NamingTables& tables = options.tables ? *options.tables : adapter::NamingTables::Builtin();

  std::vector<const Header*> headers;
  for (const auto& shard : shards) headers.push_back(shard.header);
  auto read = ModelModules::Read(headers, base_config, options.arch, tables);
  if (!read.ok()) return read.error();
  const ModelModules& modules = read.value();
  const adapter::ArchTable* table = modules.table();
  if (table) plan.arch = table->name;
  auto kind_of = [&](const std::string& path) { return modules.KindOf(path); };
  auto weight_of = [&](const std::string& path) { return modules.WeightOf(path); };

  // Which modules are targeted.
  auto chosen = modules.Select({options.target_names, options.all_linear, options.target_regex},
                               options.target_regex ? "--target-regex" : "--target-modules");
  if (!chosen.ok()) return chosen.error();
  std::vector<std::string> selected = std::move(chosen.value());

  // Each selected module must be a layer create can wrap: nn.Linear or Conv1D, with its 2-D weight.
  std::vector<std::string> wrong;
  for (const auto& path : selected) {
    auto w = weight_of(path);
    ModuleKindInfo k = kind_of(path);
    std::string why;
    if (!w)
      why = modules.modules().at(path).container ? "a container of other modules, not a layer"
                                                 : "a module without a weight";
    else if (k.kind == ModuleKind::kEmbedding) why = "an embedding (create makes Linear and Conv1D LoRA only)";
    else if (k.kind == ModuleKind::kConv2d) why = "a convolution (create makes Linear and Conv1D LoRA only)";
    else if (w->shape.size() > 2)
      why = "a layer whose weight is " + std::to_string(w->shape.size()) + "-D (fused experts?), not a Linear";
    else if (w->shape.size() != 2)
      why = "a layer whose weight is " + std::to_string(w->shape.size()) + "-D (a norm?), not a Linear";
    else if (!IsFloatingPoint(w->dtype))
      why = "a layer whose weight is " + std::string(DtypeName(w->dtype)) + ", not floating point";
    if (!why.empty()) wrong.push_back(path + ": " + why);
  }
  if (!wrong.empty()) {
    std::string message = std::to_string(wrong.size()) + " targeted module(s) cannot have a LoRA layer:";
    for (size_t i = 0; i < wrong.size() && i < 20; ++i) message += "\n  " + wrong[i];
    if (wrong.size() > 20) message += "\n  … (" + std::to_string(wrong.size()) + " in all)";
    return Invalid(message);
  }
  std::sort(selected.begin(), selected.end(),
            [](const std::string& a, const std::string& b) { return adapter::NaturalPathLess(a, b); });

  const double scaling = options.rslora ? options.alpha / std::sqrt(double(options.r))
                                        : options.alpha / double(options.r);
  bool any_conv1d = false;
  for (const auto& path : selected) {
    const auto& m = modules.modules().at(path);
    const TensorInfo w = *weight_of(path);
    const Header& h = *shards[*m.shard].header;
    ModuleKindInfo k = kind_of(path);
    CreateModule cm;
    cm.path = path;
    cm.kind = k.kind == ModuleKind::kConv1D ? ModuleKind::kConv1D : ModuleKind::kLinear;
    any_conv1d |= cm.kind == ModuleKind::kConv1D;
    cm.out_features = cm.kind == ModuleKind::kConv1D ? w.shape[1] : w.shape[0];
    cm.in_features = cm.kind == ModuleKind::kConv1D ? w.shape[0] : w.shape[1];
    if (cm.in_features == 0 || cm.out_features == 0) return Invalid("`" + path + ".weight` has an empty dimension");
    cm.scaling = scaling;
    cm.shard = *m.shard;
    cm.weight = std::string(w.name);
    cm.weight_dtype = w.dtype;
    cm.begin = h.data_start() + w.begin;
    cm.end = h.data_start() + w.end;
    if (options.dora) plan.base_bytes += cm.end - cm.begin;
    const size_t index = plan.modules.size();
    const std::string key = "base_model.model." + path;
    const uint64_t r = uint64_t(options.r);
    plan.specs.push_back({key + ".lora_A.weight", options.dtype, {r, cm.in_features}});
    plan.tensors.push_back({index, CreateTensorRole::kA});
    plan.specs.push_back({key + ".lora_B.weight", options.dtype, {cm.out_features, r}});
    plan.tensors.push_back({index, CreateTensorRole::kB});
    if (options.dora) {
      plan.specs.push_back({key + ".lora_magnitude_vector", options.dtype, {cm.out_features}});
      plan.tensors.push_back({index, CreateTensorRole::kMagnitude});
    }
    plan.modules.push_back(std::move(cm));
  }
  if (any_conv1d)
    plan.notes.push_back("Conv1D layers (weights [in, out]): fan_in_fan_out set to true, as PEFT sets it");
  if (!table)
    plan.notes.push_back(
        "no naming table fits this base: every targeted 2-D weight is taken as an nn.Linear [out, in]");

  // target_modules as PEFT saves it: the list as a set (all-linear: every full name), condensed into PEFT's
  // minimal suffixes when it has 20 entries or more; a regex as written.
  Json doc = adapter::DefaultLoraConfigDocument();
  if (options.target_regex) {
    doc["target_modules"] = *options.target_regex;
  } else {
    std::set<std::string> targets =
        options.all_linear ? std::set<std::string>(selected.begin(), selected.end())
                           : std::set<std::string>(options.target_names.begin(), options.target_names.end());
    plan.target_modules = modules.SavedTargetModules(targets);
    doc["target_modules"] = plan.target_modules;
  }
  doc["r"] = options.r;
  if (options.alpha_is_int) doc["lora_alpha"] = int64_t(options.alpha);
  else doc["lora_alpha"] = options.alpha;
  doc["use_rslora"] = options.rslora;
  doc["use_dora"] = options.dora;
  if (options.init == CreateInit::kGaussian) doc["init_lora_weights"] = "gaussian";
  if (any_conv1d) doc["fan_in_fan_out"] = true;
  if (options.base_name_or_path) doc["base_model_name_or_path"] = *options.base_name_or_path;
  if (options.revision) doc["revision"] = *options.revision;
  // PEFT records the model's class when there is no task_type (a PeftModel): from config.json's architectures.
  if (base_config) {
    auto parsed = ParseJson(*base_config, "config.json");
    if (parsed.ok() && parsed->is_object()) {
      const Json& c = parsed.value();
      if (c.contains("architectures") && c["architectures"].is_array() && !c["architectures"].empty() &&
          c["architectures"][0].is_string() && c.contains("model_type") && c["model_type"].is_string())
        doc["auto_mapping"] = {{"base_model_class", c["architectures"][0]},
                               {"parent_library", ParentLibrary(c["model_type"].get<std::string>(),
                                                                c["architectures"][0].get<std::string>(), tables)}};
    }
  }
  plan.config_text = text::DumpPythonJson(doc);

  auto write = PlanWrite(plan.specs, Metadata{{"format", "pt"}}, TensorOrder::kReference);
  if (!write.ok()) return write.error();
  plan.write = std::move(write.value());
  plan.options = std::move(options);
  return plan;
}

}  // namespace pb::compose
