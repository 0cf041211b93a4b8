#include "merge/merge_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/json.h"

#include "adapter/key_mapping.h"
#include "text/python_json.h"
#include "merge/experts_layout.h"
#include "merge/plan_problems.h"
#include "merge/quantize_plan.h"

namespace pb::merge {

namespace {

using adapter::ExtraKind;
using adapter::ExtraTensor;
using adapter::LoraModule;
using adapter::LoraShape;

std::string ShapeText(std::span<const uint64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// What the error headline can say about the two models (merge/plan_problems.h).
ModelFacts DescribeModels(const adapter::Adapter& adapter, const std::optional<Json>& config,
                          const adapter::NamingTables& tables) {
  ModelFacts facts;
  facts.adapter_modules = adapter.modules.size();
  facts.adapter_base = adapter.config.base_model_name_or_path;
  std::vector<std::string> paths;
  for (const auto& m : adapter.modules) paths.push_back(m.path);
  if (const adapter::ArchTable* own = tables.Detect(paths); own && !own->architectures.empty())
    facts.adapter_arch = own->architectures.front();
  if (config && config->is_object()) {
    if (auto a = config->find("architectures");
        a != config->end() && a->is_array() && !a->empty() && a->front().is_string())
      facts.base_arch = a->front().get<std::string>();
    else if (auto t = config->find("model_type"); t != config->end() && t->is_string())
      facts.base_arch = t->get<std::string>();
  }
  return facts;
}

struct Location {
  size_t shard;
  size_t tensor;
};

// Where base tensors are, by name, across shards. A checkpoint transformers loads under other names (its key
// mapping, adapter/key_mapping.h) is found by those too, since PEFT names an adapter's modules by them; a tensor is
// always written under the checkpoint's own name, as transformers' save_pretrained writes it back.
class BaseIndex {
 public:
  BaseIndex(const std::vector<BaseShardHeader>& shards, const std::optional<adapter::KeyRules>& rules) {
    std::vector<std::pair<std::string, Entry>> loaded;
    for (size_t s = 0; s < shards.size(); ++s)
      for (size_t t = 0; t < shards[s].header->tensor_count(); ++t) {
        std::string name(shards[s].header->tensor(t).name);
        Entry e{Location{s, t}, name};
        if (rules) {
          adapter::LoadedKey k = adapter::MapCheckpointKey(*rules, name);
          // transformers' loader also strips the base_model_prefix from a renamed key the model has without it.
          const std::string strip = rules->base_model_prefix.empty() ? "" : rules->base_model_prefix + ".";
          auto stripped = [&](const std::string& n) {
            return !strip.empty() && n.starts_with(strip) ? std::optional(n.substr(strip.size())) : std::nullopt;
          };
          if (k.name != name) {
            loaded.emplace_back(k.name, e);
            if (auto s = stripped(k.name)) loaded.emplace_back(*s, e);
          }
          if (k.not_renamed) {
            for (const auto& b : k.built) {
              built_.emplace(b, Built{name, k.not_renamed});
              if (auto s = stripped(b)) built_.emplace(*s, Built{name, k.not_renamed});
            }
            if (k.built.empty()) in_code_.push_back({name, k.not_renamed});
          }
        }
        names_.emplace(std::move(name), std::move(e));
      }
    // A checkpoint name wins over a loaded name that equals it.
    for (auto& [name, e] : loaded) names_.emplace(std::move(name), std::move(e));
    if (rules) selected_by_ = rules->selected_by;
  }
  std::optional<Location> Find(const std::string& name) const {
    auto it = names_.find(name);
    if (it == names_.end()) return std::nullopt;
    return it->second.at;
  }
  // The first tensor whose name starts with `prefix`, if any.
  std::optional<std::string> FirstWithPrefix(const std::string& prefix) const {
    auto it = names_.lower_bound(prefix);
    if (it == names_.end() || !it->first.starts_with(prefix)) return std::nullopt;
    return it->second.stored;
  }
  // The base tensor for `key` (a module path + ".weight" / ".bias", or an extra's key) as the adapter
  // names it, and the tensor's name in the checkpoint. Adapters name modules of the model class they were trained
  // on (GPT2ForSequenceClassification: "transformer.h.0..."), while a checkpoint may have been saved from the bare
  // model ("h.0..."), or the other way round: try the name as is, then with leading components dropped, then with
  // a body prefix.
  std::optional<std::pair<Location, std::string>> Resolve(const std::string& key,
                                                          const std::vector<std::string>& prefixes) const {
    if (auto e = Lookup(names_, key, prefixes)) return std::pair{e->at, e->stored};
    return std::nullopt;
  }
  // Why `key` (not found by Resolve) is not in the checkpoint under any name a rename gives: transformers builds it
  // by a conversion from other tensors, or renames the checkpoint's names in code (a rule peft-bridge does not
  // apply). Empty when neither is the case.
  std::string NotRenamed(const std::string& key, const std::vector<std::string>& prefixes) const {
    if (auto b = Lookup(built_, key, prefixes))
      return "transformers (" + selected_by_ + ") builds it from the checkpoint's `" + b->from + "` by a conversion (" +
             b->rule->what + "), not a rename; merging into a converted weight is not supported";
    if (!in_code_.empty())
      return "transformers (" + selected_by_ + ") renames the checkpoint's names (`" + in_code_.front().from +
             "`, and " + std::to_string(in_code_.size() - 1) + " more) by " + in_code_.front().rule->what +
             ", which peft-bridge does not apply";
    return {};
  }

 private:
  struct Entry {
    Location at;
    std::string stored;  // the name in the checkpoint
  };
  struct Built {
    std::string from;  // the checkpoint tensor it is built from
    const adapter::KeyRule* rule;
  };
  template <class Map>
  static const typename Map::mapped_type* Lookup(const Map& map, const std::string& key,
                                                 const std::vector<std::string>& prefixes) {
    if (auto it = map.find(key); it != map.end()) return &it->second;
    for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1))
      if (auto it = map.find(key.substr(dot + 1)); it != map.end()) return &it->second;
    for (const auto& p : prefixes) {
      if (p.empty()) continue;
      if (auto it = map.find(p + key); it != map.end()) return &it->second;
    }
    return nullptr;
  }
  std::map<std::string, Entry> names_;
  std::map<std::string, Built> built_;
  std::vector<Built> in_code_;
  std::string selected_by_;
};

bool TiedEmbeddings(const std::optional<std::string>& config) {
  if (!config) return false;
  auto parsed = ParseJson(*config, "config.json");
  if (!parsed.ok() || !parsed->is_object()) return false;
  Json& j = parsed.value();
  // transformers' PretrainedConfig default is True.
  return !j.contains("tie_word_embeddings") || !j["tie_word_embeddings"].is_boolean() ||
         j["tie_word_embeddings"].get<bool>();
}

bool EndsWithComponent(std::string_view path, std::string_view name) {
  return path == name ||
         (path.size() > name.size() && path.ends_with(name) && path[path.size() - name.size() - 1] == '.');
}

// The scheme config.json's `quantization_config` names ("compressed-tensors float-quantized", "fp8",
// "bitsandbytes 4-bit nf4"...), if it has one. Only the tensors say which weights are quantized: the config's
// targets and ignore lists leave embeddings, norms and some Linear layers as they were.
std::optional<std::string> QuantizationSchemeOf(const std::optional<Json>& config) {
  if (!config || !config->is_object()) return std::nullopt;
  auto q = config->find("quantization_config");
  if (q == config->end() || !q->is_object()) return std::nullopt;
  auto text = [&](const char* key) -> std::string {
    auto v = q->find(key);
    return v != q->end() && v->is_string() ? v->get<std::string>() : std::string();
  };
  std::string scheme = text("quant_method");
  if (scheme.empty()) scheme = "quantization_config";
  if (const std::string format = text("format"); !format.empty()) scheme += " " + format;
  if (q->value("load_in_4bit", false) == true)
    scheme += " 4-bit" + (text("bnb_4bit_quant_type").empty() ? std::string() : " " + text("bnb_4bit_quant_type"));
  else if (q->value("load_in_8bit", false) == true) scheme += " 8-bit (LLM.int8)";
  return scheme;
}

// Why the base weight `name` (of module `base_module`, its name without ".weight") is stored quantized, if it
// is: the tensors quantized formats store beside it (compressed-tensors, fine-grained FP8, bitsandbytes) or a dtype
// that is not a plain float (FP8, integers). "scheme: evidence", the scheme as config.json names it if it does.
std::optional<std::string> QuantizedWeightReason(const BaseIndex& index, const std::string& name,
                                                 const std::string& base_module, Dtype dtype,
                                                 const std::optional<std::string>& config_scheme) {
  struct Companion {
    const char* suffix;
    const char* scheme;
  };
  static constexpr Companion kCompanions[] = {
      {".weight_scale_inv", "fine-grained FP8"},      {".weight_packed", "compressed-tensors pack-quantized"},
      {".weight_zero_point", "compressed-tensors"},   {".weight_scale", "compressed-tensors"},
      {".weight_global_scale", "compressed-tensors"}, {".SCB", "bitsandbytes LLM.int8"},
      {".weight.absmax", "bitsandbytes 4-bit"},       {".weight.quant_map", "bitsandbytes 4-bit"},
  };
  std::string evidence, scheme = config_scheme.value_or("");
  for (const auto& c : kCompanions)
    if (base_module + c.suffix != name && index.Find(base_module + c.suffix)) {
      evidence = "`" + base_module + c.suffix + "` beside it";
      if (scheme.empty()) scheme = c.scheme;
      break;
    }
  if (evidence.empty())
    if (auto state = index.FirstWithPrefix(base_module + ".weight.quant_state.")) {
      evidence = "`" + *state + "` beside it";
      if (scheme.empty()) scheme = "bitsandbytes 4-bit";
    }
  const bool plain = dtype == Dtype::BF16 || dtype == Dtype::F16 || dtype == Dtype::F32 || dtype == Dtype::F64;
  if (!plain) {
    evidence = "stored as " + std::string(DtypeName(dtype)) + (evidence.empty() ? "" : ", " + evidence);
    if (scheme.empty()) scheme = dtype == Dtype::F8_E4M3 || dtype == Dtype::F8_E5M2 ? "FP8 weights" : "integer weights";
  }
  if (evidence.empty()) return std::nullopt;
  return scheme + ": " + evidence;
}

}  // namespace

std::string_view TensorOpName(TensorOp op) {
  switch (op) {
    case TensorOp::kCopy: return "copy";
    case TensorOp::kConvert: return "convert";
    case TensorOp::kLowRank: return "merge";
    case TensorOp::kLowRankEmbedding: return "merge (embedding)";
    case TensorOp::kLowRankExperts: return "merge (experts)";
    case TensorOp::kDoraRows: return "merge (DoRA)";
    case TensorOp::kDoraColumns: return "merge (DoRA, whole tensor)";
    case TensorOp::kAddBias: return "add lora_B.bias";
    case TensorOp::kReplace: return "replace";
    case TensorOp::kAdd: return "add";
    case TensorOp::kReplaceRows: return "replace rows (trainable tokens)";
  }
  return "?";
}

Result<MergePlan> PlanMerge(const std::vector<BaseShardHeader>& shards, const adapter::Adapter& adapter,
                            const std::optional<std::string>& base_config, const MergeOptions& options) {
  // config.json is checked before anything is planned: a malformed or hostile one (nested 100,000 levels
  // deep…) must fail here, before any output exists, not when the edited copy is written.
  std::optional<Json> config_doc;
  if (base_config) {
    PB_ASSIGN_OR_RETURN(auto parsed, ParseJson(*base_config, "config.json"));
    config_doc = std::move(parsed);
  }
  const adapter::NamingTables& tables = options.tables ? *options.tables : adapter::NamingTables::Builtin();
  MergePlan plan;
  const adapter::ArchTable* arch = nullptr;
  if (options.arch) {
    arch = tables.Find(*options.arch);
    if (!arch) return MakeError(ErrorCode::InvalidArgument, "unknown architecture `" + *options.arch + "`");
  } else if (base_config) {
    arch = tables.FromModelConfig(*base_config);
  }
  if (!arch) {
    std::vector<std::string> paths;
    for (const auto& m : adapter.modules) paths.push_back(m.path);
    arch = tables.Detect(paths);
  }
  if (arch) plan.arch = arch->name;
  const std::vector<std::string> prefixes = arch ? arch->body_prefixes : std::vector<std::string>{};
  const adapter::KeyMapping& key_mapping = options.key_mapping ? *options.key_mapping : adapter::KeyMapping::Builtin();
  const BaseIndex index(shards, base_config ? key_mapping.ForConfig(*base_config) : std::nullopt);
  const bool tied = TiedEmbeddings(base_config);

  // Per base tensor (shard, index): what happens to it.
  std::map<std::pair<size_t, size_t>, PlannedTensor> ops;
  std::vector<Problem> problems;
  // A mismatch between the two (shapes, dtypes, a tensor merged twice), about an adapter module or tensor key.
  auto disagree = [&](const std::string& module, std::string message) {
    problems.push_back({ErrorCode::ShapeMismatch, module, std::move(message)});
  };
  // A refusal: what PEFT itself refuses, or what a streaming merge cannot do.
  auto refuse = [&](const std::string& module, std::string message) {
    problems.push_back({ErrorCode::UnsupportedAdapter, module, std::move(message)});
  };
  std::set<std::string> modified_names;
  // A targeted base weight stored quantized: adding a float delta to its stored values loses the delta (FP8 or
  // integer codes next to their scales) or writes a wrong weight. Refused, naming the scheme, until quantized
  // bases are dequantized, merged and quantized again.
  const std::optional<std::string> quantization = QuantizationSchemeOf(config_doc);
  auto refuse_quantized = [&](const std::string& module, const std::string& name, Dtype dtype) {
    std::string base_module = name;
    for (std::string_view suffix : {".weight", ".weight_packed", ".qweight"})
      if (name.ends_with(suffix)) {
        base_module = name.substr(0, name.size() - suffix.size());
        break;
      }
    auto reason = QuantizedWeightReason(index, name, base_module, dtype, quantization);
    if (!reason) return false;
    problems.push_back({ErrorCode::UnsupportedBase, module,
                        "adapter module `" + module + "`: base tensor `" + name + "` is quantized (" + *reason +
                            "); merging into a quantized weight would lose the delta: merge into the unquantized "
                            "model, then quantize the merge (--quantize)"});
    return true;
  };

  const std::string model_type = config_doc && config_doc->is_object() && config_doc->contains("model_type") &&
                                         (*config_doc)["model_type"].is_string()
                                     ? (*config_doc)["model_type"].get<std::string>()
                                     : std::string();
  // LoRA on a fused experts parameter (PEFT's target_parameters, adapter/param_wrapper.h): the parameter as the
  // base stores it, whole [E, P, Q] or as per-expert tensors (merge/experts_layout.h), each merged per expert.
  auto plan_experts = [&](const LoraModule& m) {
    const adapter::ExpertsTarget& x = *m.experts;
    const uint64_t e_count = x.num_experts, in = m.in_features(), out = m.out_features();
    auto exists = [&](const std::string& n) { return index.Resolve(n, prefixes).has_value(); };
    auto per_expert = [&](const std::string& parameter) {
      return PerExpertTensors(x.holder, parameter, e_count, exists);
    };
    // The keys' nesting says which parameter the factors belong to only if every parameter target_parameters
    // names on this module is there.
    std::string missing;
    for (const auto& leaf : x.wrapped)
      if (!exists(x.holder + "." + leaf) && !per_expert(leaf))
        missing += (missing.empty() ? "`" : ", `") + x.holder + "." + leaf + "`";
    if (!exists(x.parameter_path) && !per_expert(x.parameter)) {
      problems.push_back({ErrorCode::ModulesNotFound, m.path,
                          "adapter module `" + m.path + "` (LoRA on parameter `" + x.parameter_path +
                              "`): the base has no tensor `" + x.parameter_path + "`, nor the " +
                              std::to_string(e_count) + " experts' own tensors transformers fuses into it"});
      return;
    }
    if (!missing.empty()) {
      refuse(m.path, "adapter module `" + m.path + "`: target_parameters names parameters the base lacks (" + missing +
                         "), so which parameter PEFT's nested keys belong to is not known");
      return;
    }
    auto add = [&](const std::pair<Location, std::string>& at, PlannedTensor p) {
      if (ops.count({at.first.shard, at.first.tensor})) {
        disagree(m.path, "`" + at.second + "` would be merged twice (modules `" +
                             ops[{at.first.shard, at.first.tensor}].module->path + "` and `" + m.path + "`)");
        return false;
      }
      modified_names.insert(at.second);
      ops[{at.first.shard, at.first.tensor}] = std::move(p);
      return true;
    };
    auto start = [&](const std::pair<Location, std::string>& at) {
      TensorInfo info = shards[at.first.shard].header->tensor(at.first.tensor);
      PlannedTensor p;
      p.source = at.first.tensor;
      p.name = at.second;
      p.in_dtype = info.dtype;
      p.shape.assign(info.shape.begin(), info.shape.end());
      p.module = &m;
      p.op = TensorOp::kLowRankExperts;
      p.experts = e_count;
      p.expert_rows = out;
      return p;
    };
    auto floating = [&](const PlannedTensor& p) {
      if (refuse_quantized(m.path, p.name, p.in_dtype)) return false;
      if (IsConvertibleFloat(p.in_dtype)) return true;
      disagree(m.path, "`" + p.name + "` is " + std::string(DtypeName(p.in_dtype)) +
                           ": only floating-point weights can be merged (quantized bases are not supported)");
      return false;
    };
    if (auto found = index.Resolve(x.parameter_path, prefixes)) {
      // Stored whole: [E, out, in], or [E, in, out] for transformers' is_transposed experts; where the two
      // matrix dimensions are equal only the model type can tell.
      PlannedTensor p = start(*found);
      if (!floating(p)) return;
      const std::string need = "[" + std::to_string(e_count) + ", " + std::to_string(out) + ", " + std::to_string(in) +
                               "] (or [" + std::to_string(e_count) + ", " + std::to_string(in) + ", " +
                               std::to_string(out) + "] for transposed experts)";
      const bool three_d = p.shape.size() == 3 && p.shape[0] == e_count;
      const bool plain = three_d && p.shape[1] == out && p.shape[2] == in;
      const bool transposed = three_d && p.shape[1] == in && p.shape[2] == out;
      if (!plain && !transposed) {
        disagree(m.path, "`" + p.name + "` is " + ShapeText(p.shape) + " but the adapter's factors of `" +
                             x.parameter_path + "` need " + need);
        return;
      }
      bool is_transposed = transposed;
      if (plain && transposed) {
        if (model_type.empty()) {
          refuse(m.path, "`" + p.name + "` " + ShapeText(p.shape) +
                             " is square per expert, so whether it is stored "
                             "[E, out, in] or [E, in, out] depends on the model class; the base's config.json "
                             "(model_type) is needed");
          return;
        }
        is_transposed = adapter::ExpertsAreTransposed(model_type);
      }
      p.orientation = is_transposed ? Orientation::kInOut : Orientation::kOutIn;
      p.expert_rows = p.shape[1];
      p.rows = p.shape[0] * p.shape[1];
      p.cols = p.shape[2];
      if (add(*found, std::move(p))) ++plan.modules_matched;
      return;
    }
    // One nn.Linear weight [rows, in] per expert and part (gate, up): row ranges of expert e's [out, in].
    const auto names = *per_expert(x.parameter);
    for (uint64_t e = 0; e < e_count; ++e) {
      uint64_t row = 0;
      for (const auto& n : names[e]) {
        auto at = *index.Resolve(n, prefixes);
        PlannedTensor p = start(at);
        if (!floating(p)) return;
        if (p.shape.size() != 2 || p.shape[1] != in || row + p.shape[0] > out) {
          disagree(m.path, "`" + p.name + "` is " + ShapeText(p.shape) + " but as part of expert " + std::to_string(e) +
                               " of `" + x.parameter_path + "` [" + std::to_string(out) + ", " + std::to_string(in) +
                               "] it needs " + std::to_string(in) + " columns and at most " +
                               std::to_string(out - row) + " rows");
          return;
        }
        p.orientation = Orientation::kOutIn;
        p.first_row = e * out + row;
        p.rows = p.shape[0];
        p.cols = in;
        row += p.shape[0];
        if (!add(at, std::move(p))) return;
      }
      if (row != out) {
        disagree(m.path, "expert " + std::to_string(e) + "'s tensors of `" + x.parameter_path + "` have " +
                             std::to_string(row) + " rows but the adapter's factors need " + std::to_string(out));
        return;
      }
    }
    ++plan.modules_matched;
  };

  for (const LoraModule& m : adapter.modules) {
    if (m.experts) {
      plan_experts(m);
      continue;
    }
    auto found = index.Resolve(m.path + ".weight", prefixes);
    std::string note;
    if (!found && tied && EndsWithComponent(m.path, "lm_head") && m.shape == LoraShape::kLinear && !m.magnitude) {
      // A tied checkpoint stores the embedding only; PEFT's in-place merge into lm_head changes the shared
      // tensor, so the delta lands on the embedding (same [vocab, dim] layout as lm_head's [out, in]).
      for (const char* emb :
           {"model.embed_tokens.weight", "embed_tokens.weight", "transformer.wte.weight", "wte.weight"})
        if ((found = index.Resolve(emb, prefixes))) break;
      if (found)
        note = "lm_head is tied to `" + found->second + "`: its delta is merged there, as PEFT's in-place merge does";
    }
    if (!found) {
      // Packed layouts store no `<m>.weight`: compressed-tensors' `<m>.weight_packed`, GPTQ's and AWQ's `<m>.qweight`.
      auto packed = index.Resolve(m.path + ".weight_packed", prefixes);
      if (!packed) packed = index.Resolve(m.path + ".qweight", prefixes);
      if (packed) {
        TensorInfo info = shards[packed->first.shard].header->tensor(packed->first.tensor);
        if (!refuse_quantized(m.path, packed->second, info.dtype))
          problems.push_back(
              {ErrorCode::UnsupportedBase, m.path,
               "adapter module `" + m.path + "`: base tensor `" + packed->second + "` is quantized (" +
                   quantization.value_or("packed weights") +
                   "); merging into a quantized weight would "
                   "lose the delta: merge into the unquantized model, then quantize the merge (--quantize)"});
        continue;
      }
      // A converter's target is a module's weight, or a parameter itself (the fused experts' gate_up_proj).
      std::string why = index.NotRenamed(m.path + ".weight", prefixes);
      if (why.empty()) why = index.NotRenamed(m.path, prefixes);
      if (!why.empty()) {
        problems.push_back({ErrorCode::UnsupportedBase, m.path, "adapter module `" + m.path + "`: " + why});
        continue;
      }
      problems.push_back({ErrorCode::ModulesNotFound, m.path,
                          "adapter module `" + m.path + "`: the base has no tensor `" + m.path + ".weight`"});
      continue;
    }
    const Location loc = found->first;
    const std::string name = found->second;  // plain variables: clang 14 cannot capture structured bindings
    TensorInfo info = shards[loc.shard].header->tensor(loc.tensor);
    PlannedTensor p;
    p.source = loc.tensor;
    p.name = name;
    p.in_dtype = info.dtype;
    p.shape.assign(info.shape.begin(), info.shape.end());
    p.module = &m;
    if (refuse_quantized(m.path, name, info.dtype)) continue;
    if (!IsConvertibleFloat(info.dtype)) {
      disagree(m.path, "`" + name + "` is " + std::string(DtypeName(info.dtype)) +
                           ": only floating-point weights can be merged (quantized bases are not supported)");
      continue;
    }
    const uint64_t in = m.in_features(), out = m.out_features();
    std::optional<adapter::ModuleKind> kind;
    if (arch)
      if (auto match = tables.MatchHf(*arch, m.path)) kind = match->tmpl->kind;
    auto mismatch = [&](const std::string& expected) {
      disagree(m.path, "`" + name + "` is " + ShapeText(p.shape) + " but the adapter's module `" + m.path + "` needs " +
                           expected);
    };
    if (m.shape == LoraShape::kEmbedding) {
      if (p.shape != std::vector<uint64_t>{in, out}) {
        mismatch(ShapeText(std::vector<uint64_t>{in, out}));
        continue;
      }
      p.orientation = Orientation::kInOut;
      p.rows = in;
      p.cols = out;
      p.op = m.magnitude ? TensorOp::kDoraColumns : TensorOp::kLowRankEmbedding;
    } else if (m.shape == LoraShape::kConv) {
      std::vector<uint64_t> expected = m.a.shape;
      expected[0] = out;
      if (p.shape.size() == expected.size() && p.shape[0] == out && p.shape[1] != in && p.shape[1] != 0 &&
          in % p.shape[1] == 0 && std::equal(p.shape.begin() + 2, p.shape.end(), expected.begin() + 2)) {
        refuse(m.path, "`" + name + "`: a grouped convolution (" + ShapeText(p.shape) +
                           "); PEFT refuses to merge LoRA into conv layers with groups > 1");
        continue;
      }
      if (p.shape != expected) {
        mismatch(ShapeText(expected));
        continue;
      }
      p.orientation = Orientation::kOutIn;
      p.rows = out;
      p.cols = info.element_count() / out;
      p.op = m.magnitude ? TensorOp::kDoraRows : TensorOp::kLowRank;
    } else {
      const std::vector<uint64_t> out_in{out, in}, in_out{in, out};
      bool transposed;
      if (kind == adapter::ModuleKind::kConv1D) transposed = true;
      else if (kind == adapter::ModuleKind::kLinear || kind == adapter::ModuleKind::kEmbedding) transposed = false;
      else if (p.shape == out_in && p.shape != in_out) transposed = false;
      else if (p.shape == in_out && p.shape != out_in) transposed = true;
      else transposed = adapter.config.fan_in_fan_out;  // square and no table: the flag is all there is
      if (p.shape != (transposed ? in_out : out_in)) {
        mismatch(ShapeText(transposed ? in_out : out_in));
        continue;
      }
      p.orientation = transposed ? Orientation::kInOut : Orientation::kOutIn;
      p.rows = p.shape[0];
      p.cols = p.shape[1];
      if (m.magnitude) p.op = transposed ? TensorOp::kDoraColumns : TensorOp::kDoraRows;
      else p.op = TensorOp::kLowRank;
    }
    if (m.magnitude && options.unmerge) {
      refuse(m.path, "module `" + m.path +
                         "`: DoRA cannot be unmerged from a merged file (the weight norms "
                         "it needs are those of the original weights)");
      continue;
    }
    if (!note.empty()) plan.notes.push_back(note);
    if (ops.count({loc.shard, loc.tensor})) {
      disagree(m.path, "`" + name + "` would be merged twice (modules `" + ops[{loc.shard, loc.tensor}].module->path +
                           "` and `" + m.path + "`)");
      continue;
    }
    modified_names.insert(name);
    ops[{loc.shard, loc.tensor}] = std::move(p);
    ++plan.modules_matched;
    if (m.b_bias) {
      auto bias = index.Resolve(m.path + ".bias", prefixes);
      if (!bias) {
        disagree(m.path, "module `" + m.path + "` has a lora_B.bias but the base has no `" + m.path + ".bias`");
        continue;
      }
      TensorInfo bi = shards[bias->first.shard].header->tensor(bias->first.tensor);
      if (bi.element_count() != out || !IsConvertibleFloat(bi.dtype)) {
        disagree(m.path, "`" + bias->second + "` " + ShapeText(bi.shape) + " does not fit lora_B.bias [" +
                             std::to_string(out) + "]");
        continue;
      }
      PlannedTensor b;
      b.source = bias->first.tensor;
      b.name = bias->second;
      b.in_dtype = bi.dtype;
      b.shape.assign(bi.shape.begin(), bi.shape.end());
      b.module = &m;
      b.op = TensorOp::kAddBias;
      b.rows = 1;
      b.cols = out;
      modified_names.insert(b.name);
      ops[{bias->first.shard, bias->first.tensor}] = std::move(b);
    }
  }

  // Trainable tokens (PEFT's TrainableTokensLayer.merge): `W.index_copy(0, indices, rows.to(W.dtype))`, the
  // listed rows replaced by the adapter's, rounded to the weight's dtype. A tied lm_head shares the embedding's
  // tensor, so where the base stores the embedding only, that one write is both; where it stores both, PEFT's
  // tied wrapper replaces the same rows of lm_head, and so do we.
  auto plan_rows = [&](const ExtraTensor& e, const Location& loc, const std::string& name) {
    TensorInfo info = shards[loc.shard].header->tensor(loc.tensor);
    const std::string module = adapter::TrainableTokensModule(e);
    if (!IsConvertibleFloat(info.dtype)) {
      disagree(module, "`" + name + "` is " + std::string(DtypeName(info.dtype)) +
                           ": trainable-token rows can only replace rows of a floating-point weight");
      return false;
    }
    if (info.shape.size() != 2 || info.shape[1] != e.tensor.shape[1]) {
      disagree(module, "`" + name + "` is " + ShapeText(info.shape) + " but the trainable-token rows of `" + module +
                           "` are " + ShapeText(e.tensor.shape));
      return false;
    }
    std::set<uint64_t> seen;
    for (uint64_t row : e.token_indices) {
      if (row >= info.shape[0]) {
        disagree(module, "trainable token " + std::to_string(row) + " is outside `" + name + "` (" +
                             std::to_string(info.shape[0]) + " rows)");
        return false;
      }
      if (!seen.insert(row).second) {
        refuse(module, "trainable token " + std::to_string(row) + " is listed twice for `" + module +
                           "`: which of its rows PEFT's index_copy keeps is undefined");
        return false;
      }
    }
    if (auto other = ops.find({loc.shard, loc.tensor}); other != ops.end()) {
      refuse(module,
             "`" + name + "` has trainable-token rows and is also " +
                 (other->second.op == TensorOp::kReplaceRows
                      ? std::string("given rows by `") + other->second.replacement->key + "`"
                  : other->second.module
                      ? "merged with module `" + other->second.module->path + "`"
                      : "replaced by `" + (other->second.replacement ? other->second.replacement->key : name) + "`") +
                 ": the order PEFT would apply them in is not defined by the adapter");
      return false;
    }
    PlannedTensor p;
    p.source = loc.tensor;
    p.name = name;
    p.in_dtype = info.dtype;
    p.shape.assign(info.shape.begin(), info.shape.end());
    p.op = TensorOp::kReplaceRows;
    p.replacement = &e;
    p.rows = info.shape[0];
    p.cols = info.shape[1];
    modified_names.insert(name);
    ops[{loc.shard, loc.tensor}] = std::move(p);
    std::string rows;
    for (size_t i = 0; i < e.token_indices.size() && i < 10; ++i)
      rows += (i ? ", " : "") + std::to_string(e.token_indices[i]);
    if (e.token_indices.size() > 10) rows += " and " + std::to_string(e.token_indices.size() - 10) + " more";
    plan.notes.push_back("`" + name + "`: rows " + rows + " replaced by the adapter's trainable tokens");
    return true;
  };
  auto plan_trainable_tokens = [&](const ExtraTensor& e) {
    const std::string module = adapter::TrainableTokensModule(e);
    if (options.unmerge) {
      refuse(module, "`" + e.key +
                         "`: trainable-token rows replaced the base's rows, which the adapter does not "
                         "keep (PEFT's unmerge restores them from the base it loaded); they cannot be unmerged");
      return;
    }
    auto found = index.Resolve(module + ".weight", prefixes);
    std::string note;
    if (!found && tied && EndsWithComponent(module, "lm_head")) {
      for (const char* emb :
           {"model.embed_tokens.weight", "embed_tokens.weight", "transformer.wte.weight", "wte.weight"})
        if ((found = index.Resolve(emb, prefixes))) break;
      if (found) note = "lm_head is tied to `" + found->second + "`: its trainable-token rows replace rows there";
    }
    if (!found) {
      problems.push_back({ErrorCode::ModulesNotFound, module,
                          "trainable tokens of `" + module + "`: the base has no tensor `" + module + ".weight`"});
      return;
    }
    if (!plan_rows(e, found->first, found->second)) return;
    if (!note.empty()) plan.notes.push_back(note);
    const bool input_embedding = EndsWithComponent(module, "embed_tokens") || EndsWithComponent(module, "wte");
    if (tied && input_embedding) {
      auto head = index.Resolve("lm_head.weight", prefixes);
      if (head && !ops.count({head->first.shard, head->first.tensor}) && plan_rows(e, head->first, head->second))
        plan.notes.push_back("`" + head->second + "` is tied to `" + found->second +
                             "`: the same trainable-token rows replace rows there");
    }
  };

  // Extras: full tensors that replace (or join) the base's.
  std::vector<PlannedTensor> additions;
  for (const ExtraTensor& e : adapter.extras) {
    if (e.kind == ExtraKind::kTrainableTokens) {
      plan_trainable_tokens(e);
      continue;
    }
    std::string key = e.key;
    // Saved embeddings of LoRA-wrapped layers carry ".base_layer."; the base tensor has the plain name.
    if (auto at = key.find(".base_layer."); at != std::string::npos) key.erase(at, std::string(".base_layer").size());
    auto found = index.Resolve(key, prefixes);
    if (options.unmerge) {
      refuse(e.key, "`" + e.key + "`: a " + std::string(adapter::ExtraKindName(e.kind)) +
                        " tensor replaced the base weights, which the adapter does not keep; it cannot be unmerged");
      continue;
    }
    PlannedTensor p;
    p.replacement = &e;
    p.in_dtype = e.tensor.dtype;
    p.shape = e.tensor.shape;
    if (found) {
      TensorInfo info = shards[found->first.shard].header->tensor(found->first.tensor);
      if (found->second.ends_with(".weight") && refuse_quantized(e.key, found->second, info.dtype)) continue;
      if (std::vector<uint64_t>(info.shape.begin(), info.shape.end()) != e.tensor.shape) {
        disagree(e.key, "`" + found->second + "` is " + ShapeText(info.shape) + " but the adapter's `" + e.key +
                            "` is " + ShapeText(e.tensor.shape));
        continue;
      }
      if (auto merged = ops.find({found->first.shard, found->first.tensor}); merged != ops.end()) {
        // save_embedding_layers: PEFT loads the saved full weight into the base layer, then merges the LoRA
        // delta on top of it. The merge runs on the adapter's copy instead of the base's bytes.
        if (e.kind != ExtraKind::kSavedEmbedding || merged->second.op == TensorOp::kAddBias ||
            merged->second.op == TensorOp::kReplaceRows) {
          disagree(e.key, "`" + found->second + "` is both merged and replaced by `" + e.key + "`");
          continue;
        }
        merged->second.replacement = &e;
        plan.notes.push_back("`" + found->second +
                             "`: the adapter's saved copy is loaded, then the LoRA is merged into it");
        continue;
      }
      p.source = found->first.tensor;
      p.name = found->second;
      p.in_dtype = info.dtype;
      p.op = TensorOp::kReplace;
      modified_names.insert(p.name);
      ops[{found->first.shard, found->first.tensor}] = std::move(p);
    } else {
      if (tied && (EndsWithComponent(key, "lm_head.weight"))) {
        refuse(e.key, "`" + e.key +
                          "` replaces a tied lm_head, which the base stores only as the embedding; "
                          "writing both would need the embedding twice (not supported in a streaming merge)");
        continue;
      }
      p.name = key;
      p.op = TensorOp::kAdd;  // e.g. a classification head the base checkpoint lacks
      plan.notes.push_back("`" + key + "` is not in the base; it is added from the adapter");
      additions.push_back(std::move(p));
    }
  }

  if (!problems.empty()) return PlanProblemsError(std::move(problems), DescribeModels(adapter, config_doc, tables));
  // No silent loss: an adapter tensor the merge cannot apply is refused, unless allow_partial.
  PB_ASSIGN_OR_RETURN(plan.dropped_warnings, adapter::CheckDropped(options.unmerge ? "unmerge" : "merge",
                                                                   adapter.rejected, options.allow_partial));

  if (options.quantize) {
    if (!base_config)
      return MakeError(
          ErrorCode::InvalidArgument,
          "--quantize needs the base's config.json (or --base-config): the quantization_config the loaders "
          "read goes there");
    if (options.unmerge) return MakeError(ErrorCode::InvalidArgument, "--quantize applies to merge, not unmerge");
    plan.quantize.emplace();
    plan.quantize->options = *options.quantize;
  }

  // Output dtypes and the per-shard plans, in input data order.
  auto out_dtype = [&](Dtype in) { return options.dtype && IsConvertibleFloat(in) ? *options.dtype : in; };
  for (size_t s = 0; s < shards.size(); ++s) {
    ShardPlan shard;
    shard.name = shards[s].name;
    const Header& h = *shards[s].header;
    for (size_t t = 0; t < h.tensor_count(); ++t) {
      auto it = ops.find({s, t});
      PlannedTensor p;
      if (it != ops.end()) {
        p = std::move(it->second);
        if (p.op == TensorOp::kLowRank || p.op == TensorOp::kLowRankEmbedding || p.op == TensorOp::kLowRankExperts ||
            p.op == TensorOp::kDoraRows || p.op == TensorOp::kDoraColumns)
          ++plan.tensors_merged;
      } else {
        TensorInfo info = h.tensor(t);
        p.source = t;
        p.name = std::string(info.name);
        p.in_dtype = info.dtype;
        p.shape.assign(info.shape.begin(), info.shape.end());
        p.op = out_dtype(info.dtype) == info.dtype ? TensorOp::kCopy : TensorOp::kConvert;
      }
      p.out_dtype = out_dtype(p.in_dtype);
      if (p.op == TensorOp::kReplace) p.out_dtype = out_dtype(p.in_dtype);
      shard.tensors.push_back(std::move(p));
    }
    if (s + 1 == shards.size())
      for (auto& a : additions) {
        a.out_dtype = options.dtype && IsConvertibleFloat(a.in_dtype) ? *options.dtype : a.in_dtype;
        shard.tensors.push_back(std::move(a));
      }
    if (plan.quantize)
      for (auto& p : shard.tensors) PlanQuantizedTensor(p, tables, arch, *plan.quantize);
    std::vector<TensorSpec> specs;
    for (const auto& p : shard.tensors) {
      if (!p.quantized) {
        specs.push_back({p.name, p.out_dtype, p.shape});
        continue;
      }
      const QuantizedOutput& q = *p.quantized;
      specs.push_back({q.weight, q.weight_dtype, q.weight_shape});
      specs.push_back({q.scale, q.scale_dtype, q.scale_shape});
      if (!q.shape.empty()) specs.push_back({q.shape, Dtype::I64, {2}});
    }
    std::optional<Metadata> metadata;
    if (h.has_metadata()) metadata = h.metadata();
    auto write = PlanWrite(specs, metadata, TensorOrder::kInput);
    if (!write.ok()) return write.error();
    shard.write = std::move(write.value());
    plan.total_tensor_bytes += shard.write.data_size;
    plan.total_file_bytes += shard.write.total_size();
    plan.shards.push_back(std::move(shard));
  }

  // config.json: untie the embeddings when only one side of a tied pair changed; record the dtype.
  if (base_config) {
    Json& j = *config_doc;
    bool edited = false;
    if (j.is_object()) {
      bool lm_changed = false, emb_changed = false;
      for (const auto& n : modified_names) {
        lm_changed = lm_changed || n.find("lm_head") != std::string::npos;
        emb_changed = emb_changed || n.find("embed_tokens") != std::string::npos || n.find("wte.") != std::string::npos;
      }
      bool both_stored = index.Resolve("lm_head.weight", prefixes).has_value();
      if (tied && both_stored && lm_changed != emb_changed) {
        j["tie_word_embeddings"] = false;
        edited = true;
        plan.notes.push_back("tie_word_embeddings set to false: only one of lm_head and the input embedding changed");
      }
      if (options.dtype &&
          (*options.dtype == Dtype::BF16 || *options.dtype == Dtype::F16 || *options.dtype == Dtype::F32)) {
        const char* name = *options.dtype == Dtype::BF16  ? "bfloat16"
                           : *options.dtype == Dtype::F16 ? "float16"
                                                          : "float32";
        for (const char* key : {"torch_dtype", "dtype"})
          if (j.contains(key) && j[key] != name) {
            j[key] = name;
            edited = true;
          }
      }
    }
    // transformers writes config.json as json.dumps(indent=2, sort_keys=True) + "\n"; an untouched config
    // is passed through byte for byte.
    if (plan.quantize && !j.is_object())
      return MakeError(ErrorCode::InvalidConfig, "--quantize: the base's config.json is not a JSON object");
    if (plan.quantize) {
      FinishQuantizePlan(*plan.quantize);
      PB_RETURN_IF_ERROR(CheckQuantizePlan(*plan.quantize));
      plan.config_json = QuantizedConfigText(j, *plan.quantize);
    } else {
      plan.config_json = edited ? text::DumpPythonJson(j) + "\n" : *base_config;
    }
  }
  return plan;
}

}  // namespace pb::merge
