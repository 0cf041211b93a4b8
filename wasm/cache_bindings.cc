// Embind layer over compose/lora_serving.h for the adapter cache (web/src/edge/adapter-cache.js,
// docs/adapter-cache.md).
// ServedAdapter: one registered adapter, read from its header (HeaderReadingHandle's steps, then load()); resolve(name)
// says which module a runtime means, its one byte span and its scaling; factors(n, name, dtype) turns the span's bytes
// (in the window) into A and B in that dtype (output chunks: tensor 0 = A, tensor 1 = B).
// ServingMath: compose(n, terms, dtype) (the exact cat form, chunks A and B) and apply(n, terms, ...) (a base
// weight plus the terms' delta by the merge kernel, one chunk), the terms' factor bytes (then the weight's) in the
// window, in order.
#include <emscripten/bind.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "app/combine_args.h"
#include "app/command_line.h"
#include "app/option_tables.h"
#include "compose/combine_plan.h"
#include "compose/lora_serving.h"
#include "core/dtype_vocabulary.h"
#include "core/json.h"
#include "header_reading_handle.h"

namespace pb::wasm {
namespace {

using emscripten::val;

std::optional<Dtype> DtypeOption(const std::string& name) {
  if (auto d = ParseFloatDtypeName(name)) return d;
  return ParseDtype(name);  // "F32", "BF16"... as safetensors spells them
}

Error BadDtype(const std::string& name) {
  return MakeError(ErrorCode::InvalidArgument, "dtype must be 'bf16', 'f16' or 'f32' (got `" + name + "`)");
}

nlohmann::json ModuleJson(const adapter::LoraModule& m) {
  const auto span = compose::ModuleSpan(m);
  return {{"name", m.path},
          {"kind", adapter::LoraShapeName(m.shape)},
          {"rank", m.rank()},
          {"alpha", m.settings.alpha},
          {"scaling", m.settings.scaling},
          {"aShape", m.a.shape},
          {"bShape", m.b.shape},
          {"sourceDtype", DtypeName(m.a.dtype)},
          {"span", {span.begin, span.end}},
          {"bytes",
           {{"f32", compose::ServedBytes(m, Dtype::F32)},
            {"bf16", compose::ServedBytes(m, Dtype::BF16)},
            {"f16", compose::ServedBytes(m, Dtype::F16)}}}};
}

class ServedAdapter : public HeaderReadingHandle {
 public:
  // Reads the adapter whose header was just set (window: its inline tensors' bytes); errors name it by `label`.
  bool load(size_t n, const std::string& label, const std::string& weights_name, const val& config,
            const val& base_config) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    if (!adapter_header_) return Fail(MakeError(ErrorCode::InvalidArgument, "the adapter's header was not given"));
    label_ = label;
    header_ = std::move(adapter_header_);
    gguf_ = std::move(adapter_gguf_);
    config_ = OptionalText(config);
    base_config_ = OptionalText(base_config);
    inline_.assign(bytes->begin(), bytes->end());
    adapter::AdapterSource source{weights_name, {}, config_, base_config_, header_.get(), inline_, gguf_.get()};
    auto read = adapter::ReadAdapter(source, adapter::ReadOptions{});
    if (!read.ok()) return FailNamed(label, read.error());
    read_ = std::move(read.value());
    return true;
  }

  // {format, modules: [ModuleJson...]}: every LoRA module of the adapter.
  std::string modules() const {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& m : read_.adapter.modules) list.push_back(ModuleJson(m));
    return nlohmann::json{{"format", read_.adapter.source_format}, {"modules", list}}.dump();
  }

  // ModuleJson of the module `name` means, or "" (error set); "null" when the adapter has no such module and it
  // is not `required` (a composition skips the adapter).
  std::string resolve(const std::string& name, bool required) {
    auto m = compose::ServedModule(read_.adapter, name, label_);
    if (!m.ok() && !required && m.error().code == ErrorCode::InvalidArgument) return "null";
    if (!m.ok()) return Fail(m.error()), std::string();
    return ModuleJson(*m.value()).dump();
  }

  const std::string& label() const { return label_; }
  const adapter::Adapter& adapter() const { return read_.adapter; }

  // Window: the n bytes of the module's span. Output chunks: A (tensor 0), B (tensor 1) in `dtype`.
  bool factors(size_t n, const std::string& name, const std::string& dtype) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    auto d = DtypeOption(dtype);
    if (!d) return Fail(BadDtype(dtype));
    auto m = compose::ServedModule(read_.adapter, name, label_);
    if (!m.ok()) return Fail(m.error());
    auto f = compose::FactorsFromSpan(*m.value(), *bytes, *d);
    if (!f.ok()) return FailNamed(label_, f.error());
    return Check(chunks_.Add(0, 0, f->a)) && Check(chunks_.Add(1, 0, f->b));
  }

 private:
  std::string label_;
  std::unique_ptr<Header> header_;
  std::unique_ptr<gguf::GgufFile> gguf_;
  std::optional<std::string> config_, base_config_;
  std::vector<uint8_t> inline_;
  adapter::ReadResult read_;
};

// A JSON array of sizes, or nullopt (no exceptions: the WASM build cannot catch nlohmann's).
std::optional<std::vector<uint64_t>> Sizes(const nlohmann::json& j) {
  if (!j.is_array()) return std::nullopt;
  std::vector<uint64_t> out;
  for (const auto& x : j) {
    if (!x.is_number_unsigned()) return std::nullopt;
    out.push_back(x.get<uint64_t>());
  }
  return out;
}

// The terms of a composition from their JSON ([{dtype, aShape, bShape, weight, scaling}]) and the window's bytes
// (each term's A then B, in order); `rest` gets the bytes after them.
Result<std::vector<compose::ServedFactors>> TermFactors(const nlohmann::json& j, std::span<const uint8_t> bytes,
                                                        std::vector<compose::ServedTerm>& terms,
                                                        std::span<const uint8_t>& rest) {
  std::vector<compose::ServedFactors> factors;
  if (!j.is_array()) return MakeError(ErrorCode::InvalidArgument, "terms are not a JSON array");
  size_t at = 0;
  for (const auto& t : j) {
    compose::ServedFactors f;
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("aShape") ||
        !t.contains("bShape") || (t.contains("weight") && !t["weight"].is_number()) ||
        (t.contains("scaling") && !t["scaling"].is_number()))
      return MakeError(ErrorCode::InvalidArgument, "a term is not {dtype, aShape, bShape, weight, scaling}");
    auto d = DtypeOption(t["dtype"].get<std::string>());
    if (!d) return BadDtype(t["dtype"].get<std::string>());
    f.dtype = *d;
    auto a_shape = Sizes(t["aShape"]), b_shape = Sizes(t["bShape"]);
    if (!a_shape || !b_shape) return MakeError(ErrorCode::InvalidArgument, "a term's shapes are not arrays of sizes");
    f.a_shape = *a_shape;
    f.b_shape = *b_shape;
    uint64_t na = DtypeBits(*d) / 8, nb = DtypeBits(*d) / 8;
    for (auto x : f.a_shape) na *= x;
    for (auto x : f.b_shape) nb *= x;
    if (at + na + nb > bytes.size()) return MakeError(ErrorCode::InvalidArgument, "the terms' bytes are short");
    f.a.assign(bytes.begin() + at, bytes.begin() + at + na);
    f.b.assign(bytes.begin() + at + na, bytes.begin() + at + na + nb);
    at += na + nb;
    factors.push_back(std::move(f));
  }
  for (size_t i = 0; i < j.size(); ++i)
    terms.push_back({&factors[i], j[i].value("weight", 1.0), j[i].value("scaling", 1.0)});
  rest = bytes.subspan(at);
  return factors;
}

// The composition limits from the cache's options: a value <= 0 keeps the core's default.
compose::CompositionLimits LimitsOf(double terms, double rank, double bytes) {
  compose::CompositionLimits l;
  if (terms > 0) l.max_terms = static_cast<uint64_t>(terms);
  if (rank > 0) l.max_rank = static_cast<uint64_t>(rank);
  if (bytes > 0) l.max_bytes = static_cast<uint64_t>(bytes);
  return l;
}

// {maxTerms, maxRank, maxComposeBytes}: the limits a cache created with these options applies.
std::string CompositionLimitsJson(double terms, double rank, double bytes) {
  auto l = LimitsOf(terms, rank, bytes);
  return nlohmann::json{{"maxTerms", l.max_terms}, {"maxRank", l.max_rank}, {"maxComposeBytes", l.max_bytes}}.dump();
}

class ServingMath : public Handle {
 public:
  void setLimits(double terms, double rank, double bytes) { limits_ = LimitsOf(terms, rank, bytes); }

  // False (error set) when a composition of `terms` adapters is refused (CheckCompositionTerms): a caller checks
  // it before reading anything.
  bool checkTerms(double terms) {
    if (Status s = compose::CheckCompositionTerms(static_cast<uint64_t>(std::max(0.0, terms)), limits_); !s.ok())
      return Fail(s.error());
    return true;
  }

  // Output chunks: A (tensor 0), B (tensor 1) of the cat form in `dtype`.
  // `rank`: 0 for Σrᵢ, or the rank to pad to (ComposeCat).
  bool compose(size_t n, const std::string& terms_json, const std::string& dtype, double rank) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    auto d = DtypeOption(dtype);
    if (!d) return Fail(BadDtype(dtype));
    auto j = ParseJson(terms_json, "terms");
    if (!j.ok()) return Fail(j.error());
    std::vector<compose::ServedTerm> terms;
    std::span<const uint8_t> rest;
    auto factors = TermFactors(j.value(), *bytes, terms, rest);
    if (!factors.ok()) return Fail(factors.error());
    for (size_t i = 0; i < terms.size(); ++i) terms[i].factors = &factors.value()[i];  // after the vector settled
    auto out = compose::ComposeCat(terms, *d, static_cast<uint64_t>(rank), limits_);
    if (!out.ok()) return Fail(out.error());
    return Check(chunks_.Add(0, 0, out->a)) && Check(chunks_.Add(1, 0, out->b));
  }

  // Window: the terms' bytes, then the weight's. Output: the merged weight in `out_dtype` (one chunk).
  bool apply(size_t n, const std::string& terms_json, const std::string& weight_dtype, const std::string& shape_json,
             const std::string& out_dtype, const std::string& layout) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    auto wd = ParseDtype(weight_dtype);
    if (!wd) wd = DtypeOption(weight_dtype);
    auto od = out_dtype.empty() ? wd : DtypeOption(out_dtype);
    if (!wd) return Fail(MakeError(ErrorCode::InvalidArgument, "unknown weight dtype `" + weight_dtype + "`"));
    if (!od) return Fail(BadDtype(out_dtype));
    compose::WeightLayout l;
    if (layout == "out-in") l = compose::WeightLayout::kOutIn;
    else if (layout == "in-out") l = compose::WeightLayout::kInOut;
    else if (layout == "embedding") l = compose::WeightLayout::kEmbedding;
    else if (layout == "auto") l = compose::WeightLayout::kOutIn;  // refined below from the factors and the shape
    else
      return Fail(MakeError(ErrorCode::InvalidArgument,
                            "layout must be 'out-in', 'in-out' or 'embedding' (got `" + layout + "`)"));
    auto j = ParseJson(terms_json, "terms");
    auto s = ParseJson(shape_json, "shape");
    if (!j.ok()) return Fail(j.error());
    auto shape = s.ok() ? Sizes(s.value()) : std::nullopt;
    if (!shape) return Fail(MakeError(ErrorCode::InvalidArgument, "shape must be an array of sizes"));
    std::vector<compose::ServedTerm> terms;
    std::span<const uint8_t> weight;
    auto factors = TermFactors(j.value(), *bytes, terms, weight);
    if (!factors.ok()) return Fail(factors.error());
    for (size_t i = 0; i < terms.size(); ++i) terms[i].factors = &factors.value()[i];
    if (layout == "auto" && !terms.empty())
      l = compose::AutoLayout(*terms.front().factors, j.value()[0].value("kind", std::string()) == "embedding", *shape);
    auto out = compose::ApplyTerms(terms, weight, *wd, *shape, *od, l);
    if (!out.ok()) return Fail(out.error());
    return Check(chunks_.Add(0, 0, out.value()));
  }

 private:
  compose::CompositionLimits limits_;
};

// The PEFT adapter a composition is served as (examples/adapter-router): combine's own plan of `--method cat` over
// the registered adapters (compose::PlanCombine), so its tensor names, shapes, dtype, order and adapter_config.json
// are those `combine` writes, while the factors come from the cache (ComposeCat, the same maths).
class ComposeLayout : public Handle {
 public:
  void add(const ServedAdapter& a) { inputs_.push_back({a.label(), &a.adapter()}); }
  void setLimits(double terms, double rank, double bytes) { limits_ = LimitsOf(terms, rank, bytes); }

  // options: combine's JS options ({"weights": [...], "dtype": ...}; the method is cat). Returns
  // {"config", "size" (of the weights file), "weightsName", "order", "metadata", "rank", "tensors": [{name, dtype,
  // shape, module, factor: "A"|"B"}]}, or """"
  // (error set). modules_to_save copies are refused: the cache serves LoRA factors only.
  std::string plan(const std::string& options_json) {
    if (Status s = compose::CheckCompositionTerms(inputs_.size(), limits_); !s.ok())
      return Fail(s.error()), std::string();
    auto j = ParseJson(options_json, "compose options");
    if (!j.ok()) return Fail(MakeError(ErrorCode::InvalidArgument, j.error().message)), std::string();
    Json o = j.value();
    o["method"] = "cat";
    auto line = app::OptionsCommandLine("combine", o);
    if (!line.ok()) return Fail(line.error()), std::string();
    auto planned = compose::PlanCombine(inputs_, app::CombineOptionsOf(line.value()));
    if (!planned.ok()) return Fail(planned.error()), std::string();
    const compose::CombinePlan& p = planned.value();
    if (!p.extras.empty())
      return Fail(MakeError(ErrorCode::UnsupportedAdapter, "`" + p.extras.front().key +
                                                               "` is a modules_to_save copy: a composition through the "
                                                               "adapter cache serves LoRA factors only")),
             std::string();
    const auto& tensors = p.output.weights.tensors;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& m : p.modules)
      for (auto [index, factor] : {std::pair{m.a_tensor, "A"}, std::pair{m.b_tensor, "B"}})
        list.push_back({{"name", tensors.at(index).name},
                        {"dtype", DtypeName(tensors.at(index).dtype)},
                        {"shape", tensors.at(index).shape},
                        {"module", m.path},
                        {"rank", m.rank},
                        {"factor", factor}});
    nlohmann::json metadata = nullptr;
    if (p.output.weights.metadata) {
      metadata = nlohmann::json::object();
      for (const auto& [k, v] : *p.output.weights.metadata) metadata[k] = v;
    }
    auto file = adapter::PlanSafetensors(p.output.weights);
    if (!file.ok()) return Fail(file.error()), std::string();
    if (Status s = compose::CheckComposition(inputs_.size(), p.rank, file.value().total_size(), "the composed adapter",
                                             limits_);
        !s.ok())
      return Fail(s.error()), std::string();
    return nlohmann::json{{"config", p.output.config_text},
                          {"size", file.value().total_size()},
                          {"weightsName", p.output.weights_name},
                          {"order", p.output.weights.order == TensorOrder::kInput ? "input" : "reference"},
                          {"metadata", metadata},
                          {"rank", p.rank},
                          {"tensors", list}}
        .dump();
  }

 private:
  std::vector<compose::CombineInput> inputs_;
  compose::CompositionLimits limits_;
};

}  // namespace
}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge_cache) {
  using namespace emscripten;
  using pb::wasm::ServedAdapter;
  using pb::wasm::ServingMath;
  class_<ServedAdapter, base<pb::wasm::HeaderReadingHandle>>("ServedAdapter")
      .constructor<>()
      .function("load", &ServedAdapter::load)
      .function("modules", &ServedAdapter::modules)
      .function("resolve", &ServedAdapter::resolve)
      .function("factors", &ServedAdapter::factors);
  class_<ServingMath, base<pb::wasm::Handle>>("ServingMath")
      .constructor<>()
      .function("setLimits", &ServingMath::setLimits)
      .function("checkTerms", &ServingMath::checkTerms)
      .function("compose", &ServingMath::compose)
      .function("apply", &ServingMath::apply);
  class_<pb::wasm::ComposeLayout, base<pb::wasm::Handle>>("ComposeLayout")
      .constructor<>()
      .function("add", &pb::wasm::ComposeLayout::add)
      .function("setLimits", &pb::wasm::ComposeLayout::setLimits)
      .function("plan", &pb::wasm::ComposeLayout::plan);
  function("compositionLimits", &pb::wasm::CompositionLimitsJson);
}
