#include "adapter/adapter_report.h"

#include <cstdio>
#include <map>

#include "core/json.h"

#include "adapter/delta_norm.h"
#include "adapter/natural_order.h"
#include "text/python_json.h"

namespace pb::adapter {

namespace {


std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n"; }

Json ShapeJson(const std::vector<uint64_t>& shape) {
  Json a = Json::array();
  for (uint64_t d : shape) a.push_back(d);
  return a;
}

// Four significant digits, for human-facing summaries (the JSON keeps full precision).
std::string ShortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// An alpha as PEFT's config holds it: an int when it is one (lora_alpha: 16), else Python's float repr.
std::string AlphaText(double alpha) {
  if (alpha == static_cast<double>(static_cast<int64_t>(alpha)) && alpha > -1e15 && alpha < 1e15)
    return std::to_string(static_cast<int64_t>(alpha));
  return text::PythonFloatRepr(alpha);
}

std::map<std::string, uint64_t> DtypeCounts(const Adapter& a) {
  std::map<std::string, uint64_t> counts;
  for (const auto& m : a.modules) {
    counts[std::string(DtypeName(m.a.dtype))] += 2;
    if (m.b_bias) ++counts[std::string(DtypeName(m.b_bias->dtype))];
    if (m.magnitude) ++counts[std::string(DtypeName(m.magnitude->dtype))];
  }
  for (const auto& e : a.extras) ++counts[std::string(DtypeName(e.tensor.dtype))];
  return counts;
}

// The modules' positions in natural layer order (layers.2 before layers.10), as people read a list.
std::vector<size_t> ListedOrder(const Adapter& a) {
  std::vector<std::string_view> paths;
  for (const auto& m : a.modules) paths.push_back(m.path);
  return NaturalOrder(paths);
}

double NormOf(const ReadResult& read, size_t i) {
  return i < read.delta_norms.size() ? read.delta_norms[i] : DeltaFrobeniusNorm(read.adapter.modules[i]);
}

Json ModuleJson(const LoraModule& m, double delta_norm) {
  Json j = Json::object();
  j["path"] = m.path;
  j["shape"] = LoraShapeName(m.shape);
  j["rank"] = m.rank();
  j["alpha"] = m.settings.alpha;
  j["scaling"] = m.settings.scaling;
  j["inFeatures"] = m.in_features();
  j["outFeatures"] = m.out_features();
  j["dtype"] = DtypeName(m.a.dtype);
  j["dora"] = m.magnitude.has_value();
  j["loraBias"] = m.b_bias.has_value();
  j["deltaNorm"] = delta_norm;
  j["rankPattern"] = m.settings.rank_pattern_key ? Json(*m.settings.rank_pattern_key) : Json(nullptr);
  j["alphaPattern"] = m.settings.alpha_pattern_key ? Json(*m.settings.alpha_pattern_key) : Json(nullptr);
  if (m.experts) {
    Json e = Json::object();
    e["parameter"] = m.experts->parameter_path;
    e["experts"] = m.experts->num_experts;
    e["nesting"] = m.experts->depth;
    j["experts"] = std::move(e);
  }
  return j;
}

Json MappingJson(const TensorMapping& m) {
  Json j = Json::object();
  j["from"] = m.from;
  if (m.to.empty()) {
    j["to"] = nullptr;
    j["reason"] = m.reason;
  } else {
    j["to"] = m.to;
    j["action"] = m.action;
  }
  return j;
}

Json StringList(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

// Trainable tokens: which rows of which module the tensor's rows replace.
std::string TokenRowsText(const ExtraTensor& e) {
  if (e.kind != ExtraKind::kTrainableTokens) return "";
  std::string out = " replaces rows";
  for (size_t i = 0; i < e.token_indices.size(); ++i) out += (i ? ", " : " ") + std::to_string(e.token_indices[i]);
  return out + " of " + TrainableTokensModule(e);
}

}  // namespace

std::string RenderAdapterInfoJson(const ReadResult& read) {
  const Adapter& a = read.adapter;
  const LoraConfig& c = a.config;
  Json j = Json::object();
  j["ok"] = true;
  j["format"] = a.source_format;
  j["arch"] = a.arch ? Json(*a.arch) : Json(nullptr);
  j["peftType"] = c.peft_type;
  j["taskType"] = c.task_type ? Json(*c.task_type) : Json(nullptr);
  j["baseModel"] = c.base_model_name_or_path ? Json(*c.base_model_name_or_path) : Json(nullptr);
  j["r"] = c.r;
  j["loraAlpha"] = c.lora_alpha;
  j["useRslora"] = c.use_rslora;
  j["useDora"] = c.use_dora;
  j["modules"] = Json::array();
  for (size_t i : ListedOrder(a)) j["modules"].push_back(ModuleJson(a.modules[i], NormOf(read, i)));
  j["extras"] = Json::array();
  for (const auto& e : a.extras) {
    Json x = Json::object();
    x["key"] = e.key;
    x["kind"] = ExtraKindName(e.kind);
    x["dtype"] = DtypeName(e.tensor.dtype);
    x["shape"] = ShapeJson(e.tensor.shape);
    if (e.kind == ExtraKind::kTrainableTokens) {
      x["module"] = TrainableTokensModule(e);
      x["tokenIndices"] = e.token_indices;
    }
    j["extras"].push_back(x);
  }
  Json dtypes = Json::object();
  for (const auto& [d, n] : DtypeCounts(a)) dtypes[d] = n;
  j["dtypes"] = dtypes;
  j["parameters"] = a.parameter_count();
  j["unknownConfigKeys"] = StringList(c.unknown_keys);
  j["rejected"] = Json::array();
  for (const auto& r : a.rejected) {
    Json x = Json::object();
    x["tensor"] = r.name;
    x["reason"] = r.reason;
    j["rejected"].push_back(x);
  }
  j["notes"] = StringList(a.notes);
  return Dump(j);
}

std::string RenderAdapterInfoText(const ReadResult& read) {
  const Adapter& a = read.adapter;
  const LoraConfig& c = a.config;
  std::string out;
  out += "format: " + a.source_format + (a.arch ? " (architecture " + *a.arch + ")" : std::string()) + "\n";
  out += "peft_type: " + c.peft_type + ", task_type: " + c.task_type.value_or("null") +
         ", base model: " + c.base_model_name_or_path.value_or("unknown") + "\n";
  out += "r: " + std::to_string(c.r) + ", lora_alpha: " + AlphaText(c.lora_alpha) +
         ", rsLoRA: " + (c.use_rslora ? "yes" : "no") + ", DoRA: " + (c.use_dora ? "yes" : "no") + "\n";
  out += "modules: " + std::to_string(a.modules.size()) + "\n";
  for (size_t i : ListedOrder(a)) {
    const LoraModule& m = a.modules[i];
    out += "  " + m.path + "  " + std::string(LoraShapeName(m.shape)) + " " + std::to_string(m.in_features()) + "->" +
           std::to_string(m.out_features()) + "  r=" + std::to_string(m.rank()) +
           " alpha=" + AlphaText(m.settings.alpha) + " scaling=" + text::PythonFloatRepr(m.settings.scaling) + " " +
           std::string(DtypeName(m.a.dtype)) + (m.magnitude ? " dora" : "") + (m.b_bias ? " lora_bias" : "") +
           (m.experts ? " parameter " + m.experts->parameter_path + " (" + std::to_string(m.experts->num_experts) +
                            " experts)"
                      : std::string()) +
           " |dW|=" + ShortNumber(NormOf(read, i)) + "\n";
  }
  if (!a.extras.empty()) {
    out += "other tensors: " + std::to_string(a.extras.size()) + "\n";
    for (const auto& e : a.extras)
      out += "  " + e.key + "  " + std::string(ExtraKindName(e.kind)) + " " + std::string(DtypeName(e.tensor.dtype)) +
             " " + ShapeText(e.tensor.shape) + TokenRowsText(e) + "\n";
  }
  out += "dtypes:";
  for (const auto& [d, n] : DtypeCounts(a)) out += " " + d + " x" + std::to_string(n);
  out += "\nparameters: " + std::to_string(a.parameter_count()) + "\n";
  if (!c.unknown_keys.empty()) {
    out += "unknown config keys (kept):";
    for (const auto& k : c.unknown_keys) out += " " + k;
    out += "\n";
  }
  out += "rejected tensors: " + std::to_string(a.rejected.size()) + "\n";
  for (const auto& r : a.rejected) out += "  " + r.name + ": " + r.reason + "\n";
  for (const auto& n : a.notes) out += "note: " + n + "\n";
  return out;
}

std::string RenderTranslateJson(const TranslateResult& result, AdapterFormat to, bool dry_run) {
  Json j = Json::object();
  j["ok"] = true;
  j["from"] = result.read.adapter.source_format;
  j["to"] = FormatName(to);
  j["dryRun"] = dry_run;
  Json files = Json::array();
  files.push_back(result.output.weights_name);
  if (result.output.config_name) files.push_back(*result.output.config_name);
  j["files"] = files;
  size_t mapped = 0, rejected = 0;
  j["tensors"] = Json::array();
  for (const auto& m : result.plan) {
    (m.to.empty() ? rejected : mapped)++;
    j["tensors"].push_back(MappingJson(m));
  }
  j["mapped"] = mapped;
  j["rejected"] = rejected;
  std::vector<std::string> notes = result.read.adapter.notes;
  notes.insert(notes.end(), result.output.notes.begin(), result.output.notes.end());
  j["notes"] = StringList(notes);
  return Dump(j);
}

namespace {

// The header line ("<verb> a -> b: n mapped, m rejected"), a line per tensor and the notes.
std::string TranslateBody(const TranslateResult& result, AdapterFormat to, std::string_view verb) {
  std::string out;
  size_t mapped = 0, rejected = 0;
  for (const auto& m : result.plan) (m.to.empty() ? rejected : mapped)++;
  out += std::string(verb) + " " + result.read.adapter.source_format + " -> " + std::string(FormatName(to)) + ": " +
         std::to_string(mapped) + " tensor(s) mapped, " + std::to_string(rejected) + " rejected\n";
  for (const auto& m : result.plan) {
    if (m.to.empty()) out += "  rejected " + m.from + ": " + m.reason + "\n";
    else out += "  " + m.from + " -> " + m.to + (m.action == "copy" ? "" : " (" + m.action + ")") + "\n";
  }
  for (const auto& n : result.read.adapter.notes) out += "note: " + n + "\n";
  for (const auto& n : result.output.notes) out += "note: " + n + "\n";
  return out;
}

std::string WrittenFiles(const TranslateResult& result) {
  return result.output.weights_name + (result.output.config_name ? ", " + *result.output.config_name : std::string()) +
         "\n";
}

}  // namespace

std::string RenderTranslateText(const TranslateResult& result, AdapterFormat to, bool dry_run) {
  return TranslateBody(result, to, dry_run ? "would translate" : "translated") +
         (dry_run ? "would write: " : "wrote: ") + WrittenFiles(result);
}

std::string RenderTranslatePlanText(const TranslateResult& result, AdapterFormat to) {
  return TranslateBody(result, to, "translate");
}

std::string RenderTranslateOutcomeText(const TranslateResult& result) { return "wrote: " + WrittenFiles(result); }

}  // namespace pb::adapter
