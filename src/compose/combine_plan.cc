#include "compose/combine_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/utf8.h"

namespace pb::compose {
namespace {

using adapter::Adapter;
using adapter::ExtraKind;
using adapter::LoraModule;
using adapter::ModuleSelector;

Error Invalid(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }
Error Unsupported(std::string message) { return MakeError(ErrorCode::UnsupportedAdapter, std::move(message)); }

// "a, b, c" of at most 20 names, then "… and N more".
std::string List(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 20; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 20) out += " and " + std::to_string(names.size() - 20) + " more";
  return out;
}

// PEFT's rank of an adapter: r, or the largest of r and its rank_pattern values.
uint64_t AdapterRank(const Adapter& a) {
  int64_t r = a.config.r;
  for (const auto& [key, value] : a.config.rank_pattern) r = std::max(r, value);
  return static_cast<uint64_t>(r);
}

Status CheckOptions(const CombineOptions& o, size_t inputs) {
  if (inputs == 0) return Invalid("combine needs at least one adapter");
  if (o.weights.size() != inputs)
    return Invalid(std::to_string(o.weights.size()) + " weight(s) for " + std::to_string(inputs) +
                   " adapter(s): give one weight per adapter");
  for (double w : o.weights)
    if (!std::isfinite(w)) return Invalid("a weight must be a finite number");
  if (NeedsDensity(o.method)) {
    if (!o.density)
      return Invalid(std::string(CombineMethodName(o.method)) + " needs --density (the fraction kept, in [0, 1])");
    if (!(*o.density >= 0 && *o.density <= 1)) return Invalid("--density must be in [0, 1]");
    if (IsRandomMethod(o.method) && *o.density == 0)
      return Invalid("--density 0 with " + std::string(CombineMethodName(o.method)) +
                     ": DARE divides the kept values by the density (PEFT would write NaN)");
  } else if (o.density) {
    return Invalid("--density applies to the pruning methods (ties, dare_*, magnitude_prune*), not " +
                   std::string(CombineMethodName(o.method)));
  }
  if (o.rank && !IsSvdMethod(o.method))
    return Invalid("--rank applies to the svd methods; " + std::string(CombineMethodName(o.method)) +
                   " sets the rank itself");
  if (o.rank && *o.rank == 0) return Invalid("--rank must be at least 1");
  if (o.svd_clamp && !IsSvdMethod(o.method)) return Invalid("--svd-clamp applies to the svd methods");
  if (o.svd_clamp && !(*o.svd_clamp >= 0 && *o.svd_clamp <= 1))
    return Invalid("--svd-clamp must be a quantile in [0, 1]");
  return Status::Ok();
}

// What no method can express, per input: every module concerned, in one error.
Status CheckExpressible(const std::vector<CombineInput>& inputs) {
  std::vector<std::string> problems;
  for (const auto& in : inputs) {
    std::vector<std::string> dora, bias, tokens, trained_bias, experts;
    for (const auto& m : in.adapter->modules) {
      if (m.magnitude) dora.push_back(m.path);
      if (m.experts) experts.push_back(m.experts->parameter_path);
      if (m.b_bias) bias.push_back(m.path);
    }
    for (const auto& e : in.adapter->extras) {
      if (e.kind == ExtraKind::kTrainableTokens) tokens.push_back(e.key);
      if (e.kind == ExtraKind::kBias) trained_bias.push_back(e.key);
    }
    auto add = [&](const std::vector<std::string>& names, const char* what) {
      if (!names.empty()) problems.push_back("`" + in.label + "`: " + what + ": " + List(names));
    };
    add(dora, "DoRA magnitudes (a weighted combination of DoRA modules is not a DoRA module)");
    add(bias, "lora_B.bias (lora_bias)");
    add(tokens, "trainable tokens");
    add(trained_bias, "trained biases (bias=\"all\" / \"lora_only\")");
    add(experts, "LoRA on fused experts parameters (target_parameters; not combined yet)");
  }
  if (problems.empty()) return Status::Ok();
  std::string message = "cannot combine:";
  for (const auto& p : problems) message += "\n  " + p;
  return Unsupported(message);
}

// The config's target_modules as PEFT's add_weighted_adapter writes it: the union of the lists (a set: sorted
// here, PEFT's order is the set's), or the regexes joined as "(t1)|(t2)"; mixing the two is PEFT's TypeError.
Result<Json> PeftTargetModules(const std::vector<CombineInput>& inputs) {
  const ModuleSelector::Form form = inputs.front().adapter->config.target_modules.form;
  std::set<std::string> names;
  std::string regex;
  for (const auto& in : inputs) {
    const ModuleSelector& t = in.adapter->config.target_modules;
    if (t.form != form)
      return Unsupported("--peft-compat: the adapters' target_modules mix a list and a regex, which PEFT's "
                         "add_weighted_adapter refuses; leave out --peft-compat for the exact combination");
    if (t.form == ModuleSelector::Form::kRegex) regex += (regex.empty() ? "(" : "|(") + t.regex + ")";
    else names.insert(t.names.begin(), t.names.end());
  }
  if (form == ModuleSelector::Form::kRegex) return Json(regex);
  Json list = Json::array();
  for (const auto& n : names) list.push_back(n);
  return list;
}

adapter::Tensor Placeholder(Dtype dtype, std::vector<uint64_t> shape) {
  adapter::Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.ref = adapter::TensorRef{};  // its bytes are computed when the writer reaches it
  return t;
}

}  // namespace

Result<CombinePlan> PlanCombine(const std::vector<CombineInput>& inputs, const CombineOptions& given) {
  CombinePlan plan;
  plan.options = given;
  CombineOptions& o = plan.options;
  if (o.weights.empty()) o.weights.assign(inputs.size(), 1.0);
  PB_RETURN_IF_ERROR(CheckOptions(o, inputs.size()));
  if (inputs.size() == 1 && o.method != CombineMethod::kLinear && o.method != CombineMethod::kCat) {
    plan.notes.push_back("one adapter: combined with `linear`, as PEFT does (" +
                         std::string(CombineMethodName(o.method)) + " needs several)");
    o.method = CombineMethod::kLinear;
    o.density.reset();
    o.rank.reset();
    o.svd_clamp.reset();
  }
  PB_RETURN_IF_ERROR(CheckExpressible(inputs));
  // No silent loss: a tensor of an input that maps to nothing (the readers' rejected tensors) is refused, as
  // translate and merge refuse it, unless allow_partial; then the plan's notes name every one.
  {
    std::vector<adapter::RejectedTensor> dropped;
    for (const auto& in : inputs)
      for (const auto& r : in.adapter->rejected) dropped.push_back({"`" + in.label + "`: " + r.name, r.reason});
    PB_RETURN_IF_ERROR(adapter::CheckDropped("combine", dropped, o.allow_partial));
    for (const auto& d : dropped) plan.notes.push_back("dropped " + d.name + " (--allow-partial): " + d.reason);
  }
  std::optional<std::string> arch;
  for (const auto& in : inputs) {
    if (!in.adapter->arch) continue;
    if (arch && *arch != *in.adapter->arch)
      return Invalid("the adapters are for different architectures: " + *arch + " and " + *in.adapter->arch + " (`" +
                     in.label + "`)");
    arch = in.adapter->arch;
  }

  // The modules, in order of first appearance, with the inputs that have each.
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < inputs.size(); ++i)
    for (const auto& m : inputs[i].adapter->modules) {
      auto [it, added] = index.emplace(m.path, plan.modules.size());
      if (added) plan.modules.push_back({m.path, m.shape, {}, {}, 0, 0, 0});
      plan.modules[it->second].inputs.push_back(i);
      plan.modules[it->second].ranks.push_back(m.rank());
    }
  if (plan.modules.empty()) return Invalid("the adapters have no LoRA module to combine");
  std::vector<std::string> mismatched, unequal;
  const bool separate = CombinesFactorsSeparately(o.method, o.peft_compat);
  for (const auto& pm : plan.modules) {
    const LoraModule* first = inputs[pm.inputs[0]].adapter->FindModule(pm.path);
    for (size_t k = 1; k < pm.inputs.size(); ++k) {
      const LoraModule* m = inputs[pm.inputs[k]].adapter->FindModule(pm.path);
      const bool same_a =
          std::equal(m->a.shape.begin() + 1, m->a.shape.end(), first->a.shape.begin() + 1, first->a.shape.end());
      if (m->shape != first->shape || !same_a || m->out_features() != first->out_features())
        mismatched.push_back(pm.path + " (" + inputs[pm.inputs[0]].label + ": " +
                             std::to_string(first->out_features()) + "×" + std::to_string(first->in_features()) + ", " +
                             inputs[pm.inputs[k]].label + ": " + std::to_string(m->out_features()) + "×" +
                             std::to_string(m->in_features()) + ")");
      if (separate && m->rank() != first->rank()) unequal.push_back(pm.path);
    }
  }
  if (!mismatched.empty())
    return MakeError(ErrorCode::ShapeMismatch, "the adapters disagree on the shape of " +
                                                   std::to_string(mismatched.size()) +
                                                   " module(s): " + List(mismatched));
  if (!unequal.empty())
    return Invalid(std::string(CombineMethodName(o.method)) +
                   " combines A and B elementwise, so every adapter needs the "
                   "same rank per module; they differ for " +
                   List(unequal) + " (use cat or svd)");

  // The new rank, as PEFT sets it.
  std::vector<uint64_t> ranks;
  for (const auto& in : inputs) ranks.push_back(AdapterRank(*in.adapter));
  if (separate) {
    if (std::adjacent_find(ranks.begin(), ranks.end(), std::not_equal_to<>()) != ranks.end())
      return Invalid(std::string(CombineMethodName(o.method)) +
                     " needs adapters of one rank (PEFT's rule); use cat or svd");
    plan.rank = ranks.front();
  } else if (IsSvdMethod(o.method)) {
    plan.rank = o.rank.value_or(*std::max_element(ranks.begin(), ranks.end()));
  } else {
    for (uint64_t r : ranks) plan.rank += r;  // cat, and linear's exact form
  }
  for (auto& pm : plan.modules) pm.rank = separate ? pm.ranks.front() : plan.rank;
  if (IsSvdMethod(o.method)) {
    // An SVD has at most min(out, in) singular values; the methods that prune full deltas form out × in
    // matrices, so their size is bounded (a hostile 1 × 10⁶ and 10⁶ × 1 pair would ask for 10¹² elements).
    std::vector<std::string> too_narrow, too_large;
    for (const auto& pm : plan.modules) {
      const LoraModule* m = inputs[pm.inputs[0]].adapter->FindModule(pm.path);
      const uint64_t out = m->out_features(), in = m->a.element_count() / std::max<uint64_t>(1, m->rank());
      if (plan.rank > std::min(out, in))
        too_narrow.push_back(pm.path + " (" + std::to_string(out) + "×" + std::to_string(in) + ")");
      if (o.method != CombineMethod::kSvd && (in == 0 || out > kMaxDenseElements / in))
        too_large.push_back(pm.path + " (" + std::to_string(out) + "×" + std::to_string(in) + ")");
    }
    if (!too_narrow.empty())
      return Invalid("rank " + std::to_string(plan.rank) + " is more than the smaller side of " +
                     std::to_string(too_narrow.size()) + " module(s): " + List(too_narrow) +
                     " (give a smaller --rank)");
    if (!too_large.empty())
      return Invalid(std::string(CombineMethodName(o.method)) + " forms each module's full out × in delta, at most " +
                     std::to_string(kMaxDenseElements) + " elements; too large: " + List(too_large) +
                     " (svd, or the method without _svd, work on the factors)");
  }

  const Adapter& lead = *inputs.front().adapter;
  plan.dtype = o.dtype.value_or(lead.modules.empty() ? Dtype::F32 : lead.modules.front().a.dtype);
  if (o.peft_compat && lead.config.use_rslora)
    plan.runtime_scale = static_cast<double>(plan.rank) / std::sqrt(static_cast<double>(plan.rank));

  // The combined adapter, its tensors placeholders of their final dtype and shape.
  Adapter out;
  out.config = lead.config;
  out.arch = arch;
  for (auto& pm : plan.modules) {
    const LoraModule* first = inputs[pm.inputs[0]].adapter->FindModule(pm.path);
    LoraModule m;
    m.path = pm.path;
    m.shape = first->shape;
    std::vector<uint64_t> a_shape = first->a.shape, b_shape = first->b.shape;
    a_shape[0] = pm.rank;
    b_shape[1] = pm.rank;
    m.a = Placeholder(plan.dtype, a_shape);
    m.b = Placeholder(plan.dtype, b_shape);
    out.modules.push_back(std::move(m));
  }
  // A saved embedding that is the base model's weight rather than a trained copy: PEFT's `…base_layer.weight` of a
  // LoRA-targeted embedding, or a saved embedding (save_embedding_layers) that no modules_to_save entry wraps.
  auto base_copy = [](const adapter::ExtraTensor& e, const Adapter& a) {
    if (e.kind != ExtraKind::kSavedEmbedding) return false;
    if (e.key.find(".base_layer.") != std::string::npos) return true;
    const std::string module = e.key.substr(0, e.key.rfind('.'));
    for (const auto& m : a.config.modules_to_save)
      for (std::string_view path = module; !path.empty();) {
        if (path.ends_with(m)) return false;  // PEFT's plain suffix test (_set_trainable)
        const size_t dot = path.rfind('.');
        path = dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
      }
    return true;
  };
  std::map<std::string, size_t> extra_index;
  std::vector<std::string> extra_mismatch;
  for (size_t i = 0; i < inputs.size(); ++i)
    for (const auto& e : inputs[i].adapter->extras) {
      auto [it, added] = extra_index.emplace(e.key, plan.extras.size());
      if (added) {
        plan.extras.push_back({e.key, {}, 0, base_copy(e, *inputs[i].adapter)});
        out.extras.push_back({e.key, e.kind, Placeholder(e.tensor.dtype, e.tensor.shape)});
      } else if (out.extras[it->second].tensor.shape != e.tensor.shape ||
                 out.extras[it->second].tensor.dtype != e.tensor.dtype) {
        extra_mismatch.push_back(e.key);
      }
      plan.extras[it->second].inputs.push_back(i);
    }
  if (!extra_mismatch.empty())
    return MakeError(ErrorCode::ShapeMismatch,
                     "the adapters' modules_to_save copies differ in shape or dtype: " + List(extra_mismatch));

  // adapter_config.json: the first adapter's, with r = lora_alpha = the new rank (runtime scaling 1, every
  // adapter's own scaling folded into the factors), as PEFT writes it.
  Json& doc = out.config.document;
  doc["r"] = plan.rank;
  doc["lora_alpha"] = plan.rank;
  Json rank_pattern = Json::object(), alpha_pattern = Json::object();
  for (const auto& pm : plan.modules)
    if (pm.rank != plan.rank) rank_pattern[pm.path] = pm.rank, alpha_pattern[pm.path] = pm.rank;  // scaling 1 there too
  doc["rank_pattern"] = rank_pattern;
  doc["alpha_pattern"] = alpha_pattern;
  doc["use_dora"] = false;
  if (o.peft_compat) {
    // PEFT keeps the first adapter's use_rslora (PEFT PR #3449, not in the pinned release): scaling √r, an overscale.
    PB_ASSIGN_OR_RETURN(auto targets, PeftTargetModules(inputs));
    doc["target_modules"] = targets;
    if (lead.config.use_rslora)
      plan.notes.push_back("--peft-compat keeps the first adapter's use_rslora, as PEFT does: the combined adapter is "
                           "scaled by √" +
                           std::to_string(plan.rank) + " at run time");
  } else {
    // Exactly the modules written, by their full paths: the first adapter's layers_to_transform, layers_pattern
    // or exclude_modules must not drop another adapter's modules when PEFT loads the result.
    Json targets = Json::array();
    std::vector<std::string> paths;
    for (const auto& pm : plan.modules) paths.push_back(pm.path);
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) targets.push_back(p);
    doc["target_modules"] = targets;
    doc["use_rslora"] = false;
    for (const char* key : {"layers_to_transform", "layers_pattern", "exclude_modules"})
      if (doc.contains(key)) doc[key] = nullptr;
    std::set<std::string> saved;
    for (const auto& in : inputs)
      saved.insert(in.adapter->config.modules_to_save.begin(), in.adapter->config.modules_to_save.end());
    if (!saved.empty()) {
      Json list = Json::array();
      for (const auto& s : saved) list.push_back(s);
      doc["modules_to_save"] = list;
    }
  }
  for (const auto& pm : plan.modules)
    if (pm.inputs.size() < inputs.size())
      plan.notes.push_back(pm.path + ": in " + std::to_string(pm.inputs.size()) + " of " +
                           std::to_string(inputs.size()) + " adapters; combined over those");
  for (const auto& pe : plan.extras)
    if (pe.base_copy)
      plan.notes.push_back(pe.key +
                           ": the base weight PEFT saves with the adapter (save_embedding_layers), loaded over "
                           "the model's; copied unchanged from `" +
                           inputs[pe.inputs[0]].label + "`, not weighted (the inputs that have it must agree)");
  for (const auto& pe : plan.extras)
    if (!pe.base_copy && pe.inputs.size() < inputs.size())
      plan.notes.push_back(pe.key + " (modules_to_save): in " + std::to_string(pe.inputs.size()) + " of " +
                           std::to_string(inputs.size()) + " adapters; Σ wᵢ·copyᵢ over those");

  PB_ASSIGN_OR_RETURN(plan.output, adapter::WriteAdapter(out, adapter::AdapterFormat::kPeft, {}));
  // WritePeft lists each module's A then B, then the extras.
  for (size_t m = 0; m < plan.modules.size(); ++m)
    plan.modules[m].a_tensor = 2 * m, plan.modules[m].b_tensor = 2 * m + 1;
  for (size_t e = 0; e < plan.extras.size(); ++e) plan.extras[e].tensor = 2 * plan.modules.size() + e;
  return plan;
}

}  // namespace pb::compose
