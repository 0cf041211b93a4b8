// ReadAdapter: format detection, dispatch to the per-format readers, and what they share.
#include <algorithm>
#include <cmath>
#include <map>

#include "adapter/format_internal.h"
#include "text/python_json.h"
#include "text/python_regex.h"
#include "adapter/tensor_fetch.h"

namespace pb::adapter {

using internal::ReadState;

Error PickleAdapterError(const std::string& file_name) {
  return MakeError(ErrorCode::UnsupportedAdapter,
                   "`" + file_name +
                       "` is a pickled PyTorch file; loading one can run arbitrary code, so peft-bridge refuses it. "
                       "Save the adapter with safetensors (PEFT's save_pretrained(safe_serialization=True)).");
}

Result<AdapterFormat> DetectFormat(const Header& header, const std::optional<std::string>& config) {
  if (config) {
    auto parsed = ParseJson(*config, "adapter_config.json");
    if (parsed.ok() && parsed->is_object()) {
      const Json& j = parsed.value();
      if (j.contains("peft_type")) return AdapterFormat::kPeft;
      if (j.contains("lora_parameters") || j.contains("fine_tune_type")) return AdapterFormat::kMlx;
    }
  }
  for (const auto& [key, value] : header.metadata())
    if (key == "adapter.type" || key == "general.type") return AdapterFormat::kGgufNames;
  size_t votes[kAdapterFormatCount] = {};
  for (size_t i = 0; i < header.tensor_count(); ++i) {
    std::string_view name = header.tensor(i).name;
    if (name.starts_with("base_model.model.")) ++votes[static_cast<size_t>(AdapterFormat::kPeft)];
    else if (name.ends_with(".weight.lora_a") || name.ends_with(".weight.lora_b"))
      ++votes[static_cast<size_t>(AdapterFormat::kGgufNames)];
    else if (name.ends_with(".lora_a") || name.ends_with(".lora_b")) ++votes[static_cast<size_t>(AdapterFormat::kMlx)];
    else if (name.ends_with(".lora_down.weight") || name.ends_with(".lora_up.weight"))
      ++votes[static_cast<size_t>(AdapterFormat::kKohya)];
    else if (name.ends_with("_lora.down.weight") || name.ends_with("_lora.up.weight"))
      ++votes[static_cast<size_t>(AdapterFormat::kDiffusersAttnProc)];
  }
  size_t best = std::max_element(votes, votes + kAdapterFormatCount) - votes;
  if (votes[best] == 0)
    return MakeError(ErrorCode::UnsupportedAdapter,
                     "cannot tell which adapter convention this is: no config names it and no tensor key looks like "
                     "PEFT (base_model.model.*.lora_A.weight), mlx-lm (*.lora_a), kohya (*.lora_down.weight), "
                     "llama.cpp (*.weight.lora_a) or diffusers (*.processor.to_q_lora.down.weight)");
  return static_cast<AdapterFormat>(best);
}

namespace {

Result<ReadResult> ReadAs(AdapterFormat format, ReadState& state) {
  switch (format) {
    case AdapterFormat::kPeft: return internal::ReadPeft(state);
    case AdapterFormat::kMlx: return internal::ReadMlx(state);
    case AdapterFormat::kKohya: return internal::ReadKohya(state);
    case AdapterFormat::kGgufNames: return internal::ReadGgufNames(state);
    case AdapterFormat::kGguf: return internal::ReadGgufNames(state);  // the same names, from a .gguf file's keys
    case AdapterFormat::kDiffusersAttnProc: return internal::ReadDiffusersAttnProc(state);
  }
  return MakeError(ErrorCode::InvalidArgument, "unknown format");
}

// A .gguf adapter: its header given (header-only), or parsed from the whole file's bytes.
Result<ReadResult> ReadGgufAdapter(const AdapterSource& source, const ReadOptions& options) {
  if (options.format && *options.format != AdapterFormat::kGguf && *options.format != AdapterFormat::kGgufNames)
    return MakeError(ErrorCode::InvalidArgument, source.weights_name + " is a GGUF file; it cannot be read as " +
                                                     std::string(FormatName(*options.format)));
  std::optional<gguf::GgufFile> parsed;
  if (!source.gguf) {
    auto p = gguf::ParseGgufHeader(source.weights, source.weights.size());
    if (!p.ok()) {
      Error e = p.error();
      e.message = source.weights_name + ": " + e.message;
      return e;
    }
    parsed = std::move(p->file);  // set: the whole file bounds every read, so nothing more can be needed
  }
  const gguf::GgufFile& file = source.gguf ? *source.gguf : *parsed;
  ReadState state{source, options, internal::TablesOf(options.tables), Header(), {}, {}, {}, {}, {}};
  state.result.adapter.source_format = std::string(FormatName(AdapterFormat::kGguf));
  uint64_t name_bytes = 0;
  for (const auto& t : file.tensors) name_bytes += t.name.size();
  text::RegexWorkLimit limit(text::RegexStepsFor(name_bytes));
  Result<ReadResult> read = internal::ReadGguf(state, file);
  if (limit.exceeded())
    return MakeError(ErrorCode::InvalidConfig, source.weights_name + ": matching the module patterns of its " +
                                                   internal::kPeftConfigKey + " key takes more than " +
                                                   std::to_string(limit.steps()) + " regex steps");
  return read;
}

}  // namespace

Result<ReadResult> ReadAdapter(const AdapterSource& source, const ReadOptions& options) {
  // The JSON files come first: a malformed or hostile one (100,000 levels deep…) fails before any work, and
  // the readers below, which parse them again, may then take them as valid.
  if (source.config) PB_RETURN_IF_ERROR(ParseJson(*source.config, "adapter_config.json"));
  if (source.base_config) PB_RETURN_IF_ERROR(ParseJson(*source.base_config, "config.json"));
  if (source.gguf || (!source.header && gguf::LooksLikeGguf(source.weights))) return ReadGgufAdapter(source, options);
  Result<Header> header = source.header ? Result<Header>(*source.header) : ParseWholeFile(source.weights);
  if (source.header) {
    uint64_t inline_total = 0;
    for (const ByteRange& r : InlineTensorRanges(*source.header)) inline_total += r.size();
    if (source.inline_bytes.size() != inline_total)
      return MakeError(ErrorCode::InvalidArgument, source.weights_name + ": " +
                                                       std::to_string(source.inline_bytes.size()) +
                                                       " inline tensor bytes given, the header's small tensors hold " +
                                                       std::to_string(inline_total));
  }
  if (!header.ok()) {
    Error e = header.error();
    e.message = source.weights_name + ": " + e.message;
    return e;
  }
  AdapterFormat format;
  if (options.format) {
    format = *options.format;
  } else {
    PB_ASSIGN_OR_RETURN(auto detected, DetectFormat(header.value(), source.config));
    format = detected;
  }
  ReadState state{source, options, internal::TablesOf(options.tables), std::move(header.value()), {}, {}, {}, {}, {}};
  if (source.header) {
    uint64_t at = 0;
    for (size_t i : InlineTensorIndices(state.header)) {
      state.inline_offsets.emplace(i, at);
      at += state.header.tensor(i).byte_length();
    }
  }
  state.result.adapter.source_format = std::string(FormatName(format));
  uint64_t name_bytes = 0;
  for (size_t i = 0; i < state.header.tensor_count(); ++i) name_bytes += state.header.tensor(i).name.size();
  text::RegexWorkLimit limit(text::RegexStepsFor(name_bytes));
  Result<ReadResult> read = ReadAs(format, state);
  if (limit.exceeded())
    return MakeError(ErrorCode::InvalidConfig,
                     "adapter_config.json: matching its module patterns (target_modules, exclude_modules, "
                     "modules_to_save, rank_pattern, alpha_pattern, layers_pattern) against the " +
                         std::to_string(state.header.tensor_count()) + " tensor names of " + source.weights_name +
                         " takes more than " + std::to_string(limit.steps()) +
                         " regex steps (PEFT's `re` would need at least as many); fewer or simpler patterns, or "
                         "shorter names, would fit");
  return read;
}

namespace internal {

const NamingTables& TablesOf(const NamingTables* tables) { return tables ? *tables : NamingTables::Builtin(); }

Tensor ReadState::Load(size_t index) const {
  if (!source.header) return TensorFromFile(header, source.weights, index);
  auto at = inline_offsets.find(index);
  if (at == inline_offsets.end()) return TensorRefFromHeader(header, index);
  Tensor t = TensorRefFromHeader(header, index);  // small: held, from the bytes that came with the header
  const uint8_t* begin = source.inline_bytes.data() + at->second;
  t.bytes.assign(begin, begin + t.ref->range.size());
  t.ref.reset();
  return t;
}

void ReadState::Reject(std::string name, std::string reason) {
  result.mappings.push_back({name, "", "rejected", reason});
  result.adapter.rejected.push_back({std::move(name), std::move(reason)});
}

void ReadState::AddRole(std::string source_key, std::string module, PeftRole role, Tensor tensor, std::string action) {
  role_tensors.push_back({std::move(module), role, std::move(tensor)});
  role_sources.push_back(std::move(source_key));
  role_actions.push_back(std::move(action));
}

Result<ReadResult> ReadState::Finish(LoraConfig config) {
  for (size_t i = 0; i < role_tensors.size(); ++i)
    result.mappings.push_back(
        {role_sources[i], PeftKeyFor(role_tensors[i].module, role_tensors[i].role), role_actions[i], ""});
  auto modules = AssembleModules(std::move(role_tensors), config);
  if (!modules.ok()) return modules.error();
  result.adapter.modules = std::move(modules.value());
  result.adapter.config = std::move(config);
  if (options.strict && !result.adapter.rejected.empty()) {
    std::string message = std::to_string(result.adapter.rejected.size()) + " tensor(s) of " + source.weights_name +
                          " cannot be mapped (--strict):";
    for (const auto& r : result.adapter.rejected) message += "\n  " + r.name + ": " + r.reason;
    return MakeError(ErrorCode::UnresolvedTensor, message, result.adapter.rejected.front().name);
  }
  return std::move(result);
}

Result<const ArchTable*> ChooseArch(const NamingTables& tables, const std::optional<std::string>& arch,
                                    const std::optional<std::string>& base_config) {
  if (arch) {
    if (const ArchTable* t = tables.Find(*arch)) return t;
    std::string known;
    for (const auto& t : tables.arches()) known += (known.empty() ? "" : ", ") + t.name;
    return MakeError(ErrorCode::InvalidArgument, "unknown architecture `" + *arch + "`; known: " + known);
  }
  if (base_config) {
    if (const ArchTable* t = tables.FromModelConfig(*base_config)) return t;
  }
  return static_cast<const ArchTable*>(nullptr);
}

Json AlphaJson(double alpha) {
  if (std::isfinite(alpha) && alpha == std::floor(alpha) && std::fabs(alpha) < 9.0e15)
    return static_cast<int64_t>(alpha);
  return alpha;
}

std::optional<uint64_t> LayerIndex(std::string_view path) {
  // PEFT >= 0.20: re.match(r".*?\.[^.]*\.(\d+)\.", key): the first ".<component>.<digits>." after at least
  // one leading component.
  size_t first_dot = path.find('.');
  while (first_dot != std::string_view::npos) {
    size_t next = path.find('.', first_dot + 1);
    if (next == std::string_view::npos) return std::nullopt;
    size_t end = path.find('.', next + 1);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view digits = path.substr(next + 1, end - next - 1);
    if (!digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::stoull(std::string(digits));
    first_dot = next;
  }
  return std::nullopt;
}

std::optional<uint64_t> ConfigInt(const std::optional<std::string>& config_json, const char* key) {
  if (!config_json) return std::nullopt;
  auto parsed = ParseJson(*config_json, "config.json");
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  Json& j = parsed.value();
  // Multimodal configs nest the language model's settings.
  for (const auto* scope : {&j, j.contains("text_config") ? &j["text_config"] : nullptr}) {
    if (scope && scope->is_object() && scope->contains(key) && (*scope)[key].is_number_unsigned())
      return (*scope)[key].get<uint64_t>();
  }
  return std::nullopt;
}

namespace {

std::string EscapeRegexLiteral(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view(".^$*+?()[]{}|\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// The part of a module path after its layer index ("model.layers.3.self_attn.q_proj" -> "self_attn.q_proj"),
// or the last component when there is no layer index.
std::string TargetName(std::string_view path) {
  if (auto layer = LayerIndex(path)) {
    std::string marker = "." + std::to_string(*layer) + ".";
    size_t at = path.find(marker);
    if (at != std::string_view::npos) return std::string(path.substr(at + marker.size()));
  }
  size_t dot = path.rfind('.');
  return std::string(dot == std::string_view::npos ? path : path.substr(dot + 1));
}

}  // namespace

Json SynthesizeConfig(const std::vector<std::pair<std::string, std::pair<int64_t, double>>>& rank_alpha, bool use_dora,
                      const std::optional<std::string>& base_model) {
  Json doc = DefaultLoraConfigDocument();
  // The most common rank and alpha become r and lora_alpha; the others become per-module patterns, keyed
  // by the escaped full module path (matched by PEFT >= 0.15's "(.*\.)?(p)$" rule).
  std::map<int64_t, size_t> rank_votes;
  std::map<double, size_t> alpha_votes;
  for (const auto& [path, ra] : rank_alpha) {
    ++rank_votes[ra.first];
    ++alpha_votes[ra.second];
  }
  auto most = [](const auto& votes) {
    return std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  };
  int64_t r = rank_votes.empty() ? 8 : most(rank_votes);
  double alpha = alpha_votes.empty() ? 8 : most(alpha_votes);
  doc["r"] = r;
  doc["lora_alpha"] = AlphaJson(alpha);
  Json rank_pattern = Json::object();
  Json alpha_pattern = Json::object();
  std::vector<std::string> targets;
  std::vector<uint64_t> layers;
  bool every_module_has_layer = !rank_alpha.empty();
  for (const auto& [path, ra] : rank_alpha) {
    if (ra.first != r) rank_pattern[EscapeRegexLiteral(path)] = ra.first;
    if (ra.second != alpha) alpha_pattern[EscapeRegexLiteral(path)] = AlphaJson(ra.second);
    std::string t = TargetName(path);
    if (std::find(targets.begin(), targets.end(), t) == targets.end()) targets.push_back(t);
    if (auto layer = LayerIndex(path)) {
      if (std::find(layers.begin(), layers.end(), *layer) == layers.end()) layers.push_back(*layer);
    } else {
      every_module_has_layer = false;
    }
  }
  std::sort(targets.begin(), targets.end());
  std::sort(layers.begin(), layers.end());
  doc["target_modules"] = targets;
  // Restricting to the layers present keeps PEFT from creating (zero) LoRA layers elsewhere, e.g. for mlx
  // adapters trained on the last N blocks only. Only possible when every module has a layer index.
  if (every_module_has_layer && !layers.empty()) doc["layers_to_transform"] = layers;
  doc["rank_pattern"] = rank_pattern;
  doc["alpha_pattern"] = alpha_pattern;
  doc["use_dora"] = use_dora;
  if (base_model) doc["base_model_name_or_path"] = *base_model;
  return doc;
}

Result<LoraConfig> ConfigFromDocument(const Json& document) {
  if (!WithinDepth(document))  // checked before DumpPythonJson, which recurses per level
    return MakeError(ErrorCode::InvalidConfig, "the carried PEFT config nests containers deeper than " +
                                                   std::to_string(text::kMaxConfigDepth) + " levels");
  return ParseLoraConfig(text::DumpPythonJson(document));
}

}  // namespace internal
}  // namespace pb::adapter
