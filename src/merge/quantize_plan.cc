#include "merge/quantize_plan.h"

#include <algorithm>
#include <charconv>
#include <numeric>

#include "adapter/natural_order.h"
#include "text/python_json.h"
#include "kernels/quantize.h"

namespace pb::merge {

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view LastComponent(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

bool HasComponent(std::string_view path, std::string_view component) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string_view::npos) dot = path.size();
    if (path.substr(start, dot - start) == component) return true;
    start = dot + 1;
  }
  return false;
}

// Not an nn.Linear by its name, when no naming table knows the module: embeddings (T5's relative attention bias
// is an nn.Embedding too).
bool LooksLikeEmbedding(std::string_view module) {
  const std::string_view last = LastComponent(module);
  return last.find("embed") != std::string_view::npos || last == "wte" || last == "wpe" || last == "shared" ||
         last == "relative_attention_bias";
}

// MoE routers (nn.Linear in most models; compressed-tensors counts "Router"/"Gate" modules as Linear): kept, as
// llm-compressor's MoE examples do (`re:.*mlp.gate$`).
bool IsRouter(std::string_view module) {
  const std::string_view last = LastComponent(module);
  return last == "gate" || last == "router" || EndsWith(last, "_gate");
}

bool QuantizableDtype(Dtype d) { return d == Dtype::BF16 || d == Dtype::F16 || d == Dtype::F32; }

std::string Num(uint64_t v) { return std::to_string(v); }

}  // namespace

std::string_view QuantMethodName(QuantMethod method) {
  switch (method) {
    case QuantMethod::kFp8: return "fp8";
    case QuantMethod::kInt8: return "int8";
    default: return "int4";
  }
}

std::string_view QuantSchemeName(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::kChannel: return "per-channel";
    case QuantScheme::kGroup: return "per-group";
    default: return "block";
  }
}

std::string_view QuantFormatName(const QuantizeOptions& options) {
  if (options.scheme == QuantScheme::kBlock) return "fp8";
  return options.method == QuantMethod::kFp8 ? "float-quantized" : "pack-quantized";
}

Result<QuantizeOptions> MakeQuantizeOptions(std::string_view method, std::optional<std::string_view> scheme,
                                            std::optional<std::string_view> group_size) {
  QuantizeOptions o;
  auto bad = [](std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); };
  if (method == "fp8") o.method = QuantMethod::kFp8;
  else if (method == "int8") o.method = QuantMethod::kInt8;
  else if (method == "int4") o.method = QuantMethod::kInt4;
  else return bad("unknown quantize `" + ClipForMessage(method) + "` (expected fp8, int8 or int4)");
  o.scheme = o.method == QuantMethod::kFp8 ? QuantScheme::kChannel : QuantScheme::kGroup;
  if (scheme) {
    if (*scheme == "per-channel") o.scheme = QuantScheme::kChannel;
    else if (*scheme == "per-group") o.scheme = QuantScheme::kGroup;
    else if (*scheme == "block") o.scheme = QuantScheme::kBlock;
    else return bad("unknown scheme `" + ClipForMessage(*scheme) + "` (expected per-channel, per-group or block)");
  }
  if (o.method == QuantMethod::kFp8 && o.scheme == QuantScheme::kGroup)
    return bad("--quantize fp8 takes --scheme per-channel (compressed-tensors) or block (fine-grained FP8)");
  if (o.method != QuantMethod::kFp8 && o.scheme == QuantScheme::kBlock)
    return bad("--scheme block is fine-grained FP8: it needs --quantize fp8");
  if (group_size) {
    if (o.scheme != QuantScheme::kGroup) return bad("--group-size applies to --scheme per-group only");
    uint64_t g = 0;
    const char* end = group_size->data() + group_size->size();
    auto [ptr, ec] = std::from_chars(group_size->data(), end, g);
    if (ec != std::errc() || ptr != end || g == 0 || g > (uint64_t{1} << 31))
      return bad("--group-size must be a positive integer, not `" + ClipForMessage(*group_size) + "`");
    o.group_size = g;
  }
  return o;
}

void PlanQuantizedTensor(PlannedTensor& p, const adapter::NamingTables& tables, const adapter::ArchTable* arch,
                         QuantizePlan& plan) {
  if (p.shape.size() != 2 || !EndsWith(p.name, ".weight")) return;  // not a Linear's weight
  const std::string module = p.name.substr(0, p.name.size() - std::string_view(".weight").size());
  std::optional<adapter::ModuleKind> kind;
  if (arch)
    if (auto match = tables.MatchHf(*arch, module)) kind = match->tmpl->kind;
  if (kind ? *kind != adapter::ModuleKind::kLinear : LooksLikeEmbedding(module)) return;  // Embedding, Conv1D...
  if (p.op == TensorOp::kLowRankEmbedding || p.orientation == Orientation::kInOut) return;
  const QuantizeOptions& o = plan.options;
  const uint64_t rows = p.shape[0], cols = p.shape[1];
  auto keep = [&](std::string reason, bool unexpected = false) {
    if (unexpected) plan.unexpected.push_back(plan.kept.size());
    plan.kept.emplace_back(p.name, std::move(reason));
    plan.ignore.push_back(module);
  };
  if (LastComponent(module) == "lm_head") return keep("lm_head (llm-compressor's default ignore)");
  if (HasComponent(module, "experts")) return keep("MoE expert weight");
  if (IsRouter(module)) return keep("MoE router");
  if (!QuantizableDtype(p.out_dtype))
    return keep(std::string(DtypeName(p.out_dtype)) + ": only BF16, F16 and F32 weights are quantized", true);
  plan.linear_cols.push_back(cols);
  if (o.scheme == QuantScheme::kGroup && cols % o.group_size != 0)
    return keep("in_features " + Num(cols) + " is not a multiple of the group size " + Num(o.group_size), true);
  if (o.scheme == QuantScheme::kBlock && (rows % kFp8BlockSize != 0 || cols % kFp8BlockSize != 0))
    return keep("[" + Num(rows) + ", " + Num(cols) + "] is not a whole number of 128 x 128 blocks", true);
  if (rows == 0 || cols == 0) return keep("empty weight", true);

  QuantizedOutput q;
  if (o.scheme == QuantScheme::kBlock) {
    q.weight = p.name;
    q.weight_dtype = Dtype::F8_E4M3;
    q.weight_shape = {rows, cols};
    q.scale = module + ".weight_scale_inv";
    q.scale_dtype = Dtype::F32;
    q.scale_shape = {rows / kFp8BlockSize, cols / kFp8BlockSize};
  } else {
    const uint64_t groups = o.scheme == QuantScheme::kGroup ? cols / o.group_size : 1;
    if (o.method == QuantMethod::kFp8) {
      q.weight = p.name;
      q.weight_dtype = Dtype::F8_E4M3;
      q.weight_shape = {rows, cols};
    } else {
      const int bits = o.method == QuantMethod::kInt8 ? 8 : 4;
      q.weight = module + ".weight_packed";
      q.weight_dtype = Dtype::I32;
      q.weight_shape = {rows, kernels::PackedWords(cols, bits)};
      q.shape = module + ".weight_shape";
    }
    q.scale = module + ".weight_scale";
    q.scale_dtype = p.out_dtype;
    q.scale_shape = {rows, groups};
  }
  p.rows = rows;
  p.cols = cols;
  p.quantized = std::move(q);
  plan.quantized.push_back(p.name);
}

void FinishQuantizePlan(QuantizePlan& plan) {
  std::vector<std::string> names = std::move(plan.ignore);
  names.erase(std::remove(names.begin(), names.end(), "lm_head"), names.end());
  std::sort(names.begin(), names.end(),
            [](const std::string& a, const std::string& b) { return adapter::NaturalPathLess(a, b); });
  names.erase(std::unique(names.begin(), names.end()), names.end());
  names.push_back("lm_head");
  plan.ignore = std::move(names);
}

std::string WeightClass(std::string_view name) {
  std::string out;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    const std::string_view part = name.substr(start, dot - start);
    const bool number = !part.empty() &&
                        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (start) out += '.';
    out += number ? std::string_view("*") : part;
    start = dot + 1;
  }
  return out;
}

namespace {

// (class, reason) -> how many weights, in order of first appearance.
struct KeptClass {
  std::string weight_class, reason;
  size_t count = 0;
};
std::vector<KeptClass> KeptClasses(const QuantizePlan& plan, bool unexpected_only) {
  std::vector<KeptClass> classes;
  std::vector<bool> unexpected(plan.kept.size(), false);
  for (size_t i : plan.unexpected) unexpected[i] = true;
  for (size_t i = 0; i < plan.kept.size(); ++i) {
    if (unexpected_only && !unexpected[i]) continue;
    const std::string c = WeightClass(plan.kept[i].first);
    auto it = std::find_if(classes.begin(), classes.end(),
                           [&](const KeptClass& k) { return k.weight_class == c && k.reason == plan.kept[i].second; });
    if (it == classes.end()) classes.push_back({c, plan.kept[i].second, 1});
    else ++it->count;
  }
  return classes;
}

std::string WhatText(const QuantizeOptions& o) {
  std::string what =
      "--quantize " + std::string(QuantMethodName(o.method)) + " --scheme " + std::string(QuantSchemeName(o.scheme));
  if (o.scheme == QuantScheme::kGroup) what += " --group-size " + Num(o.group_size);
  return what;
}

}  // namespace

std::vector<std::string> KeptClassLines(const QuantizePlan& plan) {
  std::vector<std::string> lines;
  for (const auto& k : KeptClasses(plan, false))
    lines.push_back(Num(k.count) + " x `" + k.weight_class + "`: " + k.reason);
  return lines;
}

Status CheckQuantizePlan(QuantizePlan& plan) {
  const QuantizeOptions& o = plan.options;
  plan.warnings.clear();
  if (plan.quantized.empty()) {
    std::string message = WhatText(o) + " would quantize no weight of this model (its config.json would claim a "
                                        "quantization that is not there):";
    const auto classes = KeptClasses(plan, false);
    if (classes.empty())
      message += "\n  it has no nn.Linear weight to quantize (embeddings, norms, transformers Conv1D and "
                 "3-D tensors are left as they are)";
    for (size_t i = 0; i < classes.size() && i < 20; ++i)
      message += "\n  " + Num(classes[i].count) + " x `" + classes[i].weight_class + "`: " + classes[i].reason;
    if (classes.size() > 20) message += "\n  and " + Num(classes.size() - 20) + " more";
    if (o.scheme == QuantScheme::kGroup && !plan.linear_cols.empty()) {
      uint64_t g = 0;
      for (uint64_t c : plan.linear_cols) g = std::gcd(g, c);
      message += "\n--group-size " + Num(o.group_size) + " divides the in_features of none of them" +
                 (g > 1 ? "; " + Num(g) + " divides every one" : std::string()) + " (or use --scheme per-channel)";
    } else if (o.scheme == QuantScheme::kBlock && !plan.linear_cols.empty()) {
      message += "\n--scheme block needs both dims to be multiples of 128 (use --scheme per-channel)";
    }
    return MakeError(ErrorCode::InvalidArgument, std::move(message));
  }
  for (const auto& k : KeptClasses(plan, true))
    plan.warnings.push_back(WhatText(o) + ": " + Num(k.count) + " weight(s) `" + k.weight_class +
                            "` stay unquantized: " + k.reason);
  return Status::Ok();
}

Json QuantizationConfigJson(const QuantizePlan& plan) {
  const QuantizeOptions& o = plan.options;
  Json ignore = Json::array();
  for (const auto& name : plan.ignore) ignore.push_back(name);
  if (o.scheme == QuantScheme::kBlock) {
    // transformers' FineGrainedFP8Config(...).to_dict(): every attribute.
    Json j = Json::object();
    j["activation_scheme"] = "dynamic";
    j["dequantize"] = false;
    j["expert_dtype"] = "fp8";
    j["modules_to_convert"] = nullptr;
    j["modules_to_not_convert"] = ignore;
    j["quant_method"] = "fp8";
    j["scale_fmt"] = "float";
    j["weight_block_size"] = Json::array({kFp8BlockSize, kFp8BlockSize});
    return j;
  }
  // QuantizationArgs.model_dump(): None-valued actorder, block_structure, scale_dtype, and observer, zp_dtype and
  // observer_kwargs not set by the preset, are omitted.
  auto args = [](int bits, const char* type, const char* strategy, Json group_size, bool dynamic) {
    Json a = Json::object();
    a["dynamic"] = dynamic;
    a["group_size"] = std::move(group_size);
    a["num_bits"] = bits;
    a["strategy"] = strategy;
    a["symmetric"] = true;
    a["type"] = type;
    return a;
  };
  const std::string format(QuantFormatName(o));
  Json scheme = Json::object();
  scheme["format"] = format;
  if (o.method == QuantMethod::kFp8) {
    scheme["input_activations"] = args(8, "float", "token", nullptr, true);  // FP8_DYNAMIC
    scheme["weights"] = args(8, "float", "channel", nullptr, false);
  } else {
    scheme["input_activations"] = nullptr;  // W8A16 / W4A16: weight-only
    const bool group = o.scheme == QuantScheme::kGroup;
    scheme["weights"] = args(o.method == QuantMethod::kInt8 ? 8 : 4, "int", group ? "group" : "channel",
                             group ? Json(o.group_size) : Json(nullptr), false);
  }
  scheme["output_activations"] = nullptr;
  scheme["targets"] = Json::array({"Linear"});
  Json j = Json::object();
  j["config_groups"] = Json::object();
  j["config_groups"]["group_0"] = std::move(scheme);
  j["format"] = format;
  j["global_compression_ratio"] = nullptr;
  j["ignore"] = std::move(ignore);
  j["kv_cache_scheme"] = nullptr;
  j["moe_sparsity_config"] = nullptr;
  j["quant_method"] = "compressed-tensors";
  j["quantization_status"] = "compressed";
  j["sparsity_config"] = Json::object();
  j["transform_config"] = Json::object();
  j["version"] = std::string(kCompressedTensorsVersion);
  return j;
}

std::string QuantizedConfigText(const Json& config, const QuantizePlan& plan) {
  Json j = config;
  j["quantization_config"] = QuantizationConfigJson(plan);
  const std::string text = text::DumpPythonJson(j);
  return plan.options.scheme == QuantScheme::kBlock ? text + "\n" : text;
}

}  // namespace pb::merge
