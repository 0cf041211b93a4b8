#include "compose/extract_plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "adapter/adapter.h"
#include "adapter/lora_config.h"
#include "compose/model_modules.h"
#include "compose/option_text.h"
#include "core/dtype_vocabulary.h"
#include "core/json.h"
#include "core/utf8.h"
#include "core/writer.h"

namespace pb::compose {
namespace {

using adapter::ShapeText;

using adapter::ModuleKind;

Error Invalid(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }
std::string Quoted(std::string_view s) { return "`" + ClipForMessage(s) + "`"; }

ModelTensor TensorOf(size_t shard, const Header& h, size_t index) {
  const TensorInfo& t = h.tensor(index);
  ModelTensor m;
  m.shard = shard;
  m.name = std::string(t.name);
  m.dtype = t.dtype;
  m.shape.assign(t.shape.begin(), t.shape.end());
  m.begin = h.data_start() + t.begin;
  m.end = h.data_start() + t.end;
  return m;
}

std::optional<std::string> TaskTypeOf(const std::optional<std::string>& config) {
  if (!config) return std::nullopt;
  auto parsed = ParseJson(*config, "config.json");
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  const Json& c = parsed.value();
  if (!c.contains("architectures") || !c["architectures"].is_array() || c["architectures"].empty() ||
      !c["architectures"][0].is_string())
    return std::nullopt;
  const std::string arch = c["architectures"][0].get<std::string>();
  if (arch.ends_with("ForCausalLM") || arch.ends_with("LMHeadModel")) return "CAUSAL_LM";
  if (arch.ends_with("ForSequenceClassification")) return "SEQ_CLS";
  if (arch.ends_with("ForTokenClassification")) return "TOKEN_CLS";
  if (arch.ends_with("ForQuestionAnswering")) return "QUESTION_ANS";
  return std::nullopt;
}

}  // namespace

uint64_t ModelTensor::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

Result<ExtractOptions> ParseExtractArguments(const ExtractArguments& args) {
  ExtractOptions o;
  if (args.rank && args.energy) return Invalid("give --rank or --energy, not both");
  if (args.rank && args.max_rank)
    return Invalid("--max-rank caps the rank --energy picks; with --rank give the rank alone");
  if (args.rank) {
    auto r = PositiveInteger(*args.rank);
    if (!r) return Invalid("--rank must be a positive integer (got " + Quoted(*args.rank) + ")");
    o.rank = *r;
  }
  if (args.max_rank) {
    auto r = PositiveInteger(*args.max_rank);
    if (!r) return Invalid("--max-rank must be a positive integer (got " + Quoted(*args.max_rank) + ")");
    o.max_rank = *r;
  }
  if (args.energy) {
    auto e = PositiveDecimal(*args.energy);
    if (!e || *e > 1)
      return Invalid("--energy must be a fraction in (0, 1] of each module's ‖ΔW‖² to keep (got " +
                     Quoted(*args.energy) + ")");
    o.energy = *e;
  }
  if (args.modules) {
    o.all_linear = false;
    size_t start = 0;
    const std::string& text = *args.modules;
    while (start <= text.size()) {
      size_t comma = std::min(text.find(',', start), text.size());
      std::string item = text.substr(start, comma - start);
      while (!item.empty() && item.front() == ' ') item.erase(item.begin());
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (item.empty()) return Invalid("--modules has an empty module name (" + Quoted(text) + ")");
      if (item == "all-linear") o.all_linear = true;
      else if (std::find(o.module_names.begin(), o.module_names.end(), item) == o.module_names.end())
        o.module_names.push_back(item);
      start = comma + 1;
    }
    if (o.all_linear && !o.module_names.empty())
      return Invalid("--modules: all-linear cannot be combined with module names");
  }
  if (args.embeddings) {
    if (*args.embeddings == "save") o.embeddings = EmbeddingPolicy::kSave;
    else if (*args.embeddings == "lora") o.embeddings = EmbeddingPolicy::kLora;
    else if (*args.embeddings == "skip") o.embeddings = EmbeddingPolicy::kSkip;
    else return Invalid("unknown --embeddings " + Quoted(*args.embeddings) + " (expected save, lora or skip)");
  }
  if (args.dtype) {
    auto dtype = ParseFloatDtypeOption(*args.dtype);
    if (!dtype.ok()) return dtype.error();
    o.dtype = dtype.value();
  }
  return o;
}

Result<ExtractPlan> PlanExtract(const std::vector<ExtractShard>& base, const std::vector<ExtractShard>& tuned,
                                const std::optional<std::string>& base_config,
                                const std::optional<std::string>& tuned_config, ExtractOptions options) {
  ExtractPlan plan;
  const adapter::NamingTables& tables = options.tables ? *options.tables : adapter::NamingTables::Builtin();

  // Both models' tensors by name; they must have the same names and shapes.
  std::map<std::string, ModelTensor> base_tensors, tuned_tensors;
  for (size_t s = 0; s < base.size(); ++s)
    for (size_t i = 0; i < base[s].header->tensor_count(); ++i) {
      ModelTensor t = TensorOf(s, *base[s].header, i);
      base_tensors.emplace(t.name, t);
    }
  for (size_t s = 0; s < tuned.size(); ++s)
    for (size_t i = 0; i < tuned[s].header->tensor_count(); ++i) {
      ModelTensor t = TensorOf(s, *tuned[s].header, i);
      tuned_tensors.emplace(t.name, t);
    }
  std::vector<std::string> differences;
  for (const auto& [name, t] : base_tensors) {
    auto it = tuned_tensors.find(name);
    if (it == tuned_tensors.end()) differences.push_back("`" + ClipForMessage(name) + "` is in the base only");
    else if (it->second.shape != t.shape)
      differences.push_back("`" + ClipForMessage(name) + "` is " + ShapeText(t.shape) + " in the base, " +
                            ShapeText(it->second.shape) + " in the tuned model");
  }
  for (const auto& [name, t] : tuned_tensors)
    if (!base_tensors.count(name)) differences.push_back("`" + ClipForMessage(name) + "` is in the tuned model only");
  if (!differences.empty()) {
    std::string message = "the tuned model does not have the base's tensors (" + std::to_string(differences.size()) +
                          " difference(s)); extract needs the same architecture and sizes (a resized vocabulary "
                          "too: resize the base's embeddings first):";
    for (size_t i = 0; i < differences.size() && i < 20; ++i) message += "\n  " + differences[i];
    if (differences.size() > 20) message += "\n  … (" + std::to_string(differences.size()) + " in all)";
    return MakeError(ErrorCode::ShapeMismatch, message);
  }

  std::vector<const Header*> headers;
  for (const auto& s : base) headers.push_back(s.header);
  auto read = ModelModules::Read(headers, base_config, options.arch, tables);
  if (!read.ok()) return read.error();
  const ModelModules& modules = read.value();
  if (modules.table()) plan.arch = modules.table()->name;
  auto chosen = modules.Select({options.module_names, options.all_linear, std::nullopt}, "--modules");
  if (!chosen.ok()) return chosen.error();
  std::set<std::string> decomposed(chosen->begin(), chosen->end());

  // Each module's own tensors (the last name component after its path).
  std::map<std::string, std::vector<std::string>> own;
  for (const auto& [name, t] : base_tensors) {
    size_t dot = name.rfind('.');
    if (dot != std::string::npos && dot > 0) own[name.substr(0, dot)].push_back(name.substr(dot + 1));
  }
  auto is_embedding = [&](const std::string& path) {
    ModuleKindInfo k = modules.KindOf(path);
    return k.known && (k.kind == ModuleKind::kEmbedding || k.output_head);
  };
  // PEFT wraps a classifier head in modules_to_save by itself for these tasks (PeftModelForSequenceClassification's
  // classifier_module_names), and then cannot load LoRA factors for it: such a head is saved whole.
  plan.task_type = TaskTypeOf(tuned_config ? tuned_config : base_config);
  const std::vector<std::string> heads = adapter::TaskHeadModules(plan.task_type.value_or(""));
  for (auto it = decomposed.begin(); it != decomposed.end();) {
    bool head = false;
    for (const auto& h : heads) head |= *it == h || it->starts_with(h + ".");
    it = head ? decomposed.erase(it) : std::next(it);
  }
  auto task_head = [&](const std::string& path) -> std::optional<std::string> {
    for (const auto& h : heads)
      if (path == h || path.starts_with(h + ".")) return h;
    return std::nullopt;
  };
  if (options.embeddings == EmbeddingPolicy::kLora)
    for (const auto& [path, names] : own)
      if (is_embedding(path) && std::count(names.begin(), names.end(), "weight")) decomposed.insert(path);

  std::vector<std::string> refused;
  for (const auto& path : decomposed) {
    const ModelTensor& w = base_tensors.at(path + ".weight");
    const ModelTensor& tw = tuned_tensors.at(path + ".weight");
    ModuleKindInfo k = modules.KindOf(path);
    ExtractModule m;
    m.path = path;
    m.layer = k.kind;
    m.base_weight = w;
    m.tuned_weight = tw;
    if (!IsConvertibleFloat(w.dtype) || !IsConvertibleFloat(tw.dtype) || DtypeBits(w.dtype) < 16 ||
        DtypeBits(tw.dtype) < 16) {
      refused.push_back(path + ": its weight is " + std::string(DtypeName(w.dtype)) + " / " +
                        std::string(DtypeName(tw.dtype)) + ", not a 16-, 32- or 64-bit float");
      continue;
    }
    if (w.shape.size() == 2) {
      m.rows = w.shape[0];
      m.cols = w.shape[1];
      if (k.kind == ModuleKind::kEmbedding) {
        m.kind = ExtractKind::kEmbeddingLora;
        m.transposed = true;  // PEFT's embedding delta is (B·A)ᵀ: [vocab, dim]
      } else {
        m.layer = k.kind == ModuleKind::kConv1D ? ModuleKind::kConv1D : ModuleKind::kLinear;
        m.transposed = k.kind == ModuleKind::kConv1D;
        plan.conv1d |= m.transposed;
      }
    } else if (w.shape.size() >= 3 && w.shape.size() <= 5 && (k.kind == ModuleKind::kConv2d || !k.known)) {
      m.layer = ModuleKind::kConv2d;
      m.rows = w.shape[0];
      m.cols = w.shape[1];
      for (size_t d = 2; d < w.shape.size(); ++d) {
        m.kernel.push_back(w.shape[d]);
        m.cols *= w.shape[d];
      }
    } else {
      refused.push_back(path + ": its weight is " + std::to_string(w.shape.size()) + "-D " + ShapeText(w.shape) +
                        (w.shape.size() == 3 ? " (fused experts?)" : "") +
                        ", not a Linear, Conv1D, convolution or embedding");
      continue;
    }
    if (m.rows == 0 || m.cols == 0) {
      refused.push_back(path + ": its weight has an empty dimension");
      continue;
    }
    if (m.kind == ExtractKind::kLora && base_tensors.count(path + ".bias")) {
      m.base_bias = base_tensors.at(path + ".bias");
      m.tuned_bias = tuned_tensors.at(path + ".bias");
      if (!IsConvertibleFloat(m.base_bias->dtype) || !IsConvertibleFloat(m.tuned_bias->dtype))
        m.base_bias = m.tuned_bias = std::nullopt;
    }
    const uint64_t side = std::min(m.rows, m.cols);
    m.max_rank = std::min(options.rank.value_or(options.max_rank), side);
    plan.largest_delta_elements = std::max(plan.largest_delta_elements, m.rows * m.cols);
    plan.modules.push_back(std::move(m));
  }
  if (!refused.empty()) {
    std::string message = std::to_string(refused.size()) + " module(s) cannot be extracted as LoRA:";
    for (size_t i = 0; i < refused.size() && i < 20; ++i) message += "\n  " + refused[i];
    if (refused.size() > 20) message += "\n  … (" + std::to_string(refused.size()) + " in all)";
    return MakeError(ErrorCode::UnsupportedAdapter, message);
  }

  // Saved whole when changed: norms (every own tensor 1-D) and, by default, the embeddings and the head.
  for (const auto& [path, names] : own) {
    if (decomposed.count(path)) continue;
    bool embedding = is_embedding(path);
    if (embedding && options.embeddings == EmbeddingPolicy::kSkip) {
      plan.skipped_embeddings.push_back(path);
      continue;
    }
    bool all_1d = true, all_float = true;
    for (const auto& n : names) {
      const ModelTensor& t = base_tensors.at(path + "." + n);
      all_1d &= t.shape.size() <= 1;
      all_float &= IsConvertibleFloat(t.dtype) && IsConvertibleFloat(tuned_tensors.at(t.name).dtype);
    }
    if (!all_float) continue;  // buffers (position ids, masks): not parameters
    const std::optional<std::string> head = task_head(path);
    if (!embedding && !all_1d && !head) {
      plan.left_out.push_back(path);
      continue;
    }
    ExtractModule m;
    m.path = path;
    m.kind = ExtractKind::kSave;
    m.layer = embedding ? ModuleKind::kEmbedding : ModuleKind::kOther;
    m.save_as = head.value_or(path);
    m.saved_names = names;
    std::sort(m.saved_names.begin(), m.saved_names.end());
    for (const auto& n : m.saved_names) {
      m.base_saved.push_back(base_tensors.at(path + "." + n));
      m.tuned_saved.push_back(tuned_tensors.at(path + "." + n));
    }
    plan.modules.push_back(std::move(m));
  }
  if (plan.modules.empty())
    return Invalid("nothing to extract: --modules picked no layer and no norm or embedding can be saved");
  std::sort(plan.modules.begin(), plan.modules.end(),
            [](const ExtractModule& a, const ExtractModule& b) { return a.key() + "." < b.key() + "."; });

  // The output dtype: --dtype, else the tuned weights' (16- or 32-bit float; F32 otherwise).
  plan.dtype = Dtype::F32;
  for (const auto& m : plan.modules)
    if (m.kind != ExtractKind::kSave) {
      Dtype d = m.tuned_weight->dtype;
      if (d == Dtype::BF16 || d == Dtype::F16 || d == Dtype::F32) plan.dtype = d;
      break;
    }
  if (options.dtype) plan.dtype = *options.dtype;

  // The header region: every candidate tensor at its largest shape bounds the real header's length.
  std::vector<TensorSpec> specs;
  for (const auto& m : plan.modules) {
    const std::string key = m.key();
    switch (m.kind) {
      case ExtractKind::kLora: {
        // A is [r, in] ([r, in_channels, kernel...] for a convolution), B [out, r] ([out, r, 1...]).
        std::vector<uint64_t> a{m.max_rank, m.kernel.empty() ? m.in_features() : m.base_weight->shape[1]};
        a.insert(a.end(), m.kernel.begin(), m.kernel.end());
        std::vector<uint64_t> b{m.out_features(), m.max_rank};
        for (size_t i = 0; i < m.kernel.size(); ++i) b.push_back(1);
        specs.push_back({key + ".lora_A.weight", plan.dtype, a});
        if (m.base_bias) specs.push_back({key + ".lora_B.bias", plan.dtype, {m.out_features()}});
        specs.push_back({key + ".lora_B.weight", plan.dtype, b});
        plan.read_bytes += (m.base_weight->end - m.base_weight->begin) + (m.tuned_weight->end - m.tuned_weight->begin);
        if (m.base_bias)
          plan.read_bytes += (m.base_bias->end - m.base_bias->begin) + (m.tuned_bias->end - m.tuned_bias->begin);
        break;
      }
      case ExtractKind::kEmbeddingLora:
        specs.push_back({key + ".lora_embedding_A", plan.dtype, {m.max_rank, m.rows}});
        specs.push_back({key + ".lora_embedding_B", plan.dtype, {m.cols, m.max_rank}});
        plan.read_bytes += (m.base_weight->end - m.base_weight->begin) + (m.tuned_weight->end - m.tuned_weight->begin);
        break;
      case ExtractKind::kSave:
        for (size_t i = 0; i < m.saved_names.size(); ++i) {
          specs.push_back({key + "." + m.saved_names[i], plan.dtype, m.tuned_saved[i].shape});
          plan.read_bytes +=
              (m.base_saved[i].end - m.base_saved[i].begin) + (m.tuned_saved[i].end - m.tuned_saved[i].begin);
        }
        break;
    }
  }
  auto bound = PlanWrite(specs, Metadata{{"format", "pt"}}, TensorOrder::kInput);
  if (!bound.ok()) return bound.error();
  plan.reserved_header = bound->header.size();

  if (plan.conv1d)
    plan.notes.push_back("Conv1D layers (weights [in, out]): fan_in_fan_out set to true, as PEFT sets it");
  if (!modules.table())
    plan.notes.push_back(
        "no naming table fits this base: every targeted 2-D weight is taken as an nn.Linear [out, in]");
  plan.model_modules = std::make_shared<const ModelModules>(std::move(read.value()));
  plan.options = std::move(options);
  return plan;
}

}  // namespace pb::compose
