#include "adapter/module_select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "core/utf8.h"

namespace pb::adapter {

namespace {

// The Python patterns PEFT builds around user strings.
std::string RankKeyPattern(std::string_view key) { return R"((.*\.)?()" + std::string(key) + ")$"; }
std::string SavedModulePattern(std::string_view m) { return R"((^|.*\.))" + std::string(m) + R"(($|\..*))"; }
std::string LayersPattern(std::string_view p) { return R"(.*?\.)" + std::string(p) + R"(\.(\d+)\.)"; }
// PEFT >= 0.20: lazy, so the first numbered segment wins ("layers.1" in "layers.1.experts.0.w1");
// <= 0.19 used a greedy ".*\." and took the last one.
constexpr std::string_view kDefaultLayersPattern = R"(.*?\.[^.]*\.(\d+)\.)";

// Letters, digits, `_` and `-`: characters that are literal in a Python regex and are neither `.` nor a
// newline, so the entry's wrapped pattern matches exactly when the entry is one whole segment of the name.
bool IsPlainSegment(std::string_view m) {
  if (m.empty()) return false;
  for (char c : m)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

// re.match("(^|.*\.)" + m + "($|\..*)", name) for every plain-segment entry m at once, in one pass: m may
// start at 0 or after a dot that `.*` reaches (no newline before it: `.` does not match one) and must end
// at a dot, at the end or before a final newline (where `$` also holds).
bool HasSavedSegment(const std::vector<std::string>& sorted_names, std::string_view name) {
  auto listed = [&](std::string_view segment) {
    return std::binary_search(sorted_names.begin(), sorted_names.end(), segment, std::less<>());
  };
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    size_t end = dot == std::string_view::npos ? name.size() : dot;
    if (listed(name.substr(start, end - start))) return true;
    if (dot == std::string_view::npos) {
      if (end > start && name[end - 1] == '\n' && listed(name.substr(start, end - 1 - start))) return true;
      return false;
    }
    if (name.substr(start, dot - start).find('\n') != std::string_view::npos) return false;  // `.*` stops here
    start = dot + 1;
  }
}

bool EndsWithDotted(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() && name.ends_with(suffix) && name[name.size() - suffix.size() - 1] == '.';
}

// A config string in double quotes, JSON-escaped, at most 200 bytes of it.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : ClipForMessage(s)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      const char* hex = "0123456789abcdef";
      out += std::string("\\u00") + hex[(c >> 4) & 15] + hex[c & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Compiles one wrapped pattern into `out`; `what` names the field and entry for the message.
Status Add(const std::string& what, const std::string& python, std::vector<text::PythonRegex>& out,
           int allowed_groups = -1) {
  auto re = text::CompilePythonRegex(python);
  if (!re.ok()) return MakeError(ErrorCode::InvalidConfig, "adapter_config.json: " + what + ": " + re.error().message);
  if (allowed_groups >= 0 && re->group_count() > allowed_groups)
    return MakeError(ErrorCode::InvalidConfig, "adapter_config.json: " + what +
                                                   " has a capturing group; PEFT would read the layer index from it");
  out.push_back(std::move(re.value()));
  return Status::Ok();
}

Result<std::shared_ptr<const ConfigPatterns>> Compile(const LoraConfig& config) {
  auto out = std::make_shared<ConfigPatterns>();
  using Form = ModuleSelector::Form;
  std::vector<text::PythonRegex> one;
  const ModuleSelector& tm = config.target_modules;
  if (tm.form == Form::kRegex && !tm.is_all_linear()) {
    PB_RETURN_IF_ERROR(Add("`target_modules` regex " + Quote(tm.regex), tm.regex, one));
    out->target_modules = std::move(one.back());
  }
  const ModuleSelector& ex = config.exclude_modules;
  if (ex.form == Form::kRegex) {
    one.clear();
    PB_RETURN_IF_ERROR(Add("`exclude_modules` regex " + Quote(ex.regex), ex.regex, one));
    if (!ex.regex.empty()) out->exclude_modules = std::move(one.back());  // PEFT tests "" for truthiness
  }
  out->rank_keys.reserve(config.rank_pattern.size());
  for (const auto& [key, r] : config.rank_pattern)
    PB_RETURN_IF_ERROR(Add("`rank_pattern` key " + Quote(key), RankKeyPattern(key), out->rank_keys));
  out->alpha_keys.reserve(config.alpha_pattern.size());
  for (const auto& [key, alpha] : config.alpha_pattern)
    PB_RETURN_IF_ERROR(Add("`alpha_pattern` key " + Quote(key), RankKeyPattern(key), out->alpha_keys));
  // PEFT splices these into regexes too (check_target_module_exists).
  std::set<std::string_view> regex_entries;
  for (const auto& m : config.modules_to_save) {
    if (IsPlainSegment(m)) {
      out->saved_module_names.push_back(m);
    } else if (regex_entries.insert(m).second) {
      if (Status s = Add("`modules_to_save` entry " + Quote(m), SavedModulePattern(m), out->modules_to_save); !s.ok())
        return s.error();
    }
  }
  std::sort(out->saved_module_names.begin(), out->saved_module_names.end());
  out->saved_module_names.erase(std::unique(out->saved_module_names.begin(), out->saved_module_names.end()),
                                out->saved_module_names.end());
  if (!config.layers_to_transform.empty()) {
    if (config.layers_pattern.empty()) {
      PB_RETURN_IF_ERROR(Add("the default layer pattern", std::string(kDefaultLayersPattern), out->layers));
    }
    for (const auto& p : config.layers_pattern)
      if (Status s = Add("`layers_pattern` entry " + Quote(p), LayersPattern(p), out->layers, /*allowed_groups=*/1);
          !s.ok())
        return s.error();
  }
  return std::shared_ptr<const ConfigPatterns>(std::move(out));
}

// The config's compiled patterns: the ones ParseLoraConfig stored, or (for a config built by hand)
// compiled now; null when they do not compile.
std::shared_ptr<const ConfigPatterns> PatternsOf(const LoraConfig& config) {
  if (config.patterns) return config.patterns;
  auto compiled = Compile(config);
  return compiled.ok() ? compiled.value() : nullptr;
}

// First key (file order) whose PEFT pattern matches; PEFT then looks the name itself up when none does.
template <class V>
std::optional<std::pair<std::string, V>> FirstPatternMatch(const std::vector<std::pair<std::string, V>>& patterns,
                                                           const std::vector<text::PythonRegex>* compiled,
                                                           std::string_view name) {
  if (patterns.empty()) return std::nullopt;
  if (compiled && compiled->size() == patterns.size()) {
    text::RegexSubject subject(name);  // decoded once for every key
    for (size_t k = 0; k < patterns.size(); ++k)
      if ((*compiled)[k].Match(subject)) return patterns[k];
  }
  for (const auto& entry : patterns)
    if (entry.first == name) return entry;
  return std::nullopt;
}

}  // namespace

Status CompileConfigPatterns(LoraConfig& config) {
  config.patterns.reset();
  PB_ASSIGN_OR_RETURN(auto compiled, Compile(config));
  config.patterns = std::move(compiled);
  return Status::Ok();
}

std::optional<bool> IsTargeted(const LoraConfig& config, std::string_view name) {
  using Form = ModuleSelector::Form;
  auto patterns = PatternsOf(config);
  if (!patterns) return std::nullopt;  // only configs that skipped ParseLoraConfig get here
  // 1. exclude_modules (an empty string or list excludes nothing: PEFT tests its truthiness).
  const ModuleSelector& ex = config.exclude_modules;
  if (patterns->exclude_modules) {
    if (patterns->exclude_modules->FullMatch(name)) return false;
  } else if (ex.form == Form::kList) {
    for (const auto& e : ex.names)
      if (name == e || EndsWithDotted(name, e)) return false;
  }
  // 2. A module cannot be both LoRA-wrapped and fully saved.
  if (HasSavedSegment(patterns->saved_module_names, name)) return false;
  if (!patterns->modules_to_save.empty()) {
    text::RegexSubject subject(name);
    for (const auto& re : patterns->modules_to_save)
      if (re.Match(subject)) return false;
  }
  // 3. / 4. target_modules. Null and "all-linear" are resolved from the model's module types.
  const ModuleSelector& tm = config.target_modules;
  if (tm.form == Form::kNone || tm.is_all_linear()) return std::nullopt;
  if (tm.form == Form::kRegex) return patterns->target_modules && patterns->target_modules->FullMatch(name);
  for (const auto& t : tm.names)
    if (name == t) return true;  // an exact entry skips the layer filter, as in PEFT
  bool found = false;
  for (const auto& t : tm.names) found = found || EndsWithDotted(name, t);
  // 5. layers_to_transform / layers_pattern, list form only.
  if (!found || config.layers_to_transform.empty()) return found;
  for (const auto& re : patterns->layers) {
    auto groups = re.MatchGroups(name);
    if (!groups) continue;
    if (groups->size() < 2 || !(*groups)[1]) return std::nullopt;
    // int(group(1)); an index too large for int64 equals none of the configured layers.
    int64_t index = 0;
    for (char c : name.substr((*groups)[1]->first, (*groups)[1]->second - (*groups)[1]->first)) {
      if (index > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
      index = index * 10 + (c - '0');
    }
    for (int64_t l : config.layers_to_transform)
      if (l == index) return true;
    return false;
  }
  return false;  // no layer index in the name
}

ModuleSettings ResolveModuleSettings(const LoraConfig& config, std::string_view name) {
  ModuleSettings s{config.r, config.lora_alpha, 0.0, std::nullopt, std::nullopt};
  auto patterns = PatternsOf(config);
  if (auto hit = FirstPatternMatch(config.rank_pattern, patterns ? &patterns->rank_keys : nullptr, name)) {
    s.r = hit->second;
    s.rank_pattern_key = hit->first;
  }
  if (auto hit = FirstPatternMatch(config.alpha_pattern, patterns ? &patterns->alpha_keys : nullptr, name)) {
    s.alpha = hit->second;
    s.alpha_pattern_key = hit->first;
  }
  double r = static_cast<double>(s.r);
  s.scaling = config.use_rslora ? s.alpha / std::sqrt(r) : s.alpha / r;
  return s;
}

}  // namespace pb::adapter
