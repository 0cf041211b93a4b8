#include "adapter/key_mapping.h"

#include <algorithm>

#include "adapter/naming_tables.h"
#include "core/json.h"

namespace pb::adapter {

namespace {

constexpr std::string_view kBuiltinPath = "transformers/key-mapping.json";

class RuleParser {
 public:
  explicit RuleParser(std::string_view path) : path_(path) {}

  Result<KeyRule> Parse(const Json& j, const std::string& where) {
    if (!j.is_object()) return Fail(where, "must be an object");
    KeyRule r;
    const std::string kind = Text(j, "kind");
    if (kind == "rename") r.kind = KeyRule::Kind::kRename;
    else if (kind == "convert") r.kind = KeyRule::Kind::kConvert;
    else if (kind == "unsupported") r.kind = KeyRule::Kind::kUnsupported;
    else return Fail(where + ".kind", "must be \"rename\", \"convert\" or \"unsupported\"");
    r.what = Text(j, "what");
    auto targets = j.find("targets");
    if (targets == j.end() || !targets->is_array() || targets->empty())
      return Fail(where + ".targets", "must be a non-empty array of strings");
    for (const auto& t : *targets) {
      if (!t.is_string()) return Fail(where + ".targets", "must be a non-empty array of strings");
      r.targets.push_back(t.get<std::string>());
    }
    if (auto s = j.find("scope"); s != j.end()) {
      if (!s->is_string()) return Fail(where + ".scope", "must be a string");
      r.scope = s->get<std::string>();
      r.base_model_prefix = Text(j, "base_model_prefix");
    }
    auto branches = j.find("branches");
    if (branches == j.end() || !branches->is_array() || branches->empty())
      return Fail(where + ".branches", "must be a non-empty array");
    // Python's alternation "(?P<g0>b0)|(?P<g1>b1)" searched anywhere: a lazy lead then the branches, each a
    // plain group (the engine has no named groups); group numbers are counted from each branch's own.
    std::string combined = "[\\s\\S]*?(?:";
    int group = 1;
    for (size_t i = 0; i < branches->size(); ++i) {
      const Json& b = (*branches)[i];
      const std::string at = where + ".branches[" + std::to_string(i) + "]";
      if (!b.is_object() || !b.contains("pattern") || !b["pattern"].is_string())
        return Fail(at, "must be an object with a string \"pattern\"");
      const std::string pattern = b["pattern"].get<std::string>();
      auto compiled = text::CompilePythonRegex(pattern);
      if (!compiled.ok()) return Fail(at + ".pattern", compiled.error().message);
      combined += (i ? ")|(" : "(") + pattern;
      r.branch_group.push_back(group);
      r.branch_patterns.push_back(pattern);
      group += 1 + compiled->group_count();
      r.branches.push_back(std::move(compiled.value()));
      r.not_after.emplace_back();
      if (auto na = b.find("not_after"); na != b.end()) {
        if (!na->is_array()) return Fail(at + ".not_after", "must be an array");
        for (size_t k = 0; k < na->size(); ++k) {
          const Json& x = (*na)[k];
          const std::string nat = at + ".not_after[" + std::to_string(k) + "]";
          if (!x.is_object() || !x.contains("pattern") || !x["pattern"].is_string() || !x.contains("width") ||
              !x["width"].is_number_unsigned() || x["width"].get<uint64_t>() > 1000)
            return Fail(nat, "must be {\"pattern\": string, \"width\": 0..1000}");
          auto lookbehind = text::CompilePythonRegex(x["pattern"].get<std::string>());
          if (!lookbehind.ok()) return Fail(nat + ".pattern", lookbehind.error().message);
          r.not_after.back().push_back({std::move(lookbehind.value()), x["width"].get<size_t>()});
        }
      }
    }
    const bool positional =
        std::any_of(r.not_after.begin(), r.not_after.end(), [](const auto& v) { return !v.empty(); });
    if (!positional) r.branches.clear();
    combined += "))";
    auto search = text::CompilePythonRegex(combined);
    if (!search.ok()) return Fail(where + ".branches", search.error().message);
    r.search = std::move(search.value());
    return r;
  }

  Result<std::vector<KeyRule>> ParseList(const Json& j, const std::string& where) {
    if (!j.is_array()) return Fail(where, "must be an array of rules");
    std::vector<KeyRule> out;
    for (size_t i = 0; i < j.size(); ++i) {
      PB_ASSIGN_OR_RETURN(auto r, Parse(j[i], where + "[" + std::to_string(i) + "]"));
      out.push_back(std::move(r));
    }
    return out;
  }

  Error Fail(const std::string& field, const std::string& what) const {
    return MakeError(ErrorCode::InvalidConfig, std::string(path_) + ": " + field + ": " + what);
  }

 private:
  static std::string Text(const Json& j, const char* key) {
    auto v = j.find(key);
    return v != j.end() && v->is_string() ? v->get<std::string>() : std::string();
  }
  std::string_view path_;
};

// The match of one rule on a key: the prefix its scope took off, the rest, and the branch's match in the rest.
struct RuleMatch {
  std::string prefix;
  std::string rest;
  size_t branch = 0;
  std::string matched;                     // Python's match.group(0)
  std::optional<std::string> first_group;  // the branch's first group (its \1), if it took part
};

std::optional<RuleMatch> Match(const KeyRule& r, std::string_view key) {
  RuleMatch m;
  if (r.scope) {  // WeightTransform._scoped_match
    const std::string scope = r.scope->empty() ? "" : *r.scope + ".";
    const std::string base = r.base_model_prefix.empty() ? "" : r.base_model_prefix + ".";
    if (key.starts_with(base + scope)) m.prefix = base + scope;
    else if (key.starts_with(scope)) m.prefix = scope;
    else return std::nullopt;
  }
  m.rest = std::string(key.substr(m.prefix.size()));
  if (!r.branches.empty()) {  // a rule with lookbehinds: Python's search, position by position
    for (size_t p = 0; p <= m.rest.size(); ++p)
      for (size_t b = 0; b < r.branches.size(); ++b) {
        bool excluded = false;
        for (const auto& na : r.not_after[b])
          if (p >= na.width && na.regex.FullMatch(std::string_view(m.rest).substr(p - na.width, na.width)))
            excluded = true;
        if (excluded) continue;
        auto groups = r.branches[b].MatchGroups(std::string_view(m.rest).substr(p));
        if (!groups) continue;
        m.branch = b;
        m.matched = m.rest.substr(p + (*groups)[0]->first, (*groups)[0]->second - (*groups)[0]->first);
        if (groups->size() > 1 && (*groups)[1])
          m.first_group = m.rest.substr(p + (*groups)[1]->first, (*groups)[1]->second - (*groups)[1]->first);
        return m;
      }
    return std::nullopt;
  }
  auto groups = r.search.MatchGroups(m.rest);
  if (!groups) return std::nullopt;
  for (size_t b = 0; b < r.branch_group.size(); ++b) {
    const size_t g = static_cast<size_t>(r.branch_group[b]);
    if (g >= groups->size() || !(*groups)[g]) continue;
    m.branch = b;
    m.matched = m.rest.substr((*groups)[g]->first, (*groups)[g]->second - (*groups)[g]->first);
    // Python's group(groupindex + 1): set only when this branch has a group of its own (the next one, if any,
    // belongs to a branch that did not match).
    if (g + 1 < groups->size() && (*groups)[g + 1])
      m.first_group = m.rest.substr((*groups)[g + 1]->first, (*groups)[g + 1]->second - (*groups)[g + 1]->first);
    return m;
  }
  return std::nullopt;
}

// WeightTransform.rename_source_key with one target: `\1` is the branch's first group, and the first occurrence of
// the matched text (str.replace(..., 1)) is replaced.
std::string Rename(const RuleMatch& m, const std::string& target) {
  std::string replacement = target;
  for (size_t at = replacement.find("\\1"); at != std::string::npos; at = replacement.find("\\1", at)) {
    const std::string group = m.first_group.value_or("");
    replacement.replace(at, 2, group);
    at += group.size();
  }
  std::string renamed = m.rest;
  if (size_t at = renamed.find(m.matched); at != std::string::npos) renamed.replace(at, m.matched.size(), replacement);
  return m.prefix + renamed;
}

}  // namespace

LoadedKey MapCheckpointKey(const KeyRules& rules, std::string_view key) {
  LoadedKey out{std::string(key)};
  // core_model_loading.rename_source_key: every rename in turn, then the first converter that matches.
  for (const KeyRule* r : rules.rules) {
    if (r->kind == KeyRule::Kind::kConvert) continue;
    auto m = Match(*r, out.name);
    if (!m) continue;
    if (r->kind == KeyRule::Kind::kUnsupported) {
      if (!out.not_renamed) out.not_renamed = r;
      continue;
    }
    out.name = Rename(*m, r->targets.front());
  }
  if (out.not_renamed) return out;
  for (const KeyRule* r : rules.rules) {
    if (r->kind != KeyRule::Kind::kConvert) continue;
    auto m = Match(*r, out.name);
    if (!m) continue;
    out.not_renamed = r;
    for (const auto& t : r->targets) out.built.push_back(Rename(*m, t));
    break;
  }
  return out;
}

const KeyMapping& KeyMapping::Builtin() {
  static const KeyMapping mapping = [] {
    for (const auto& f : EmbeddedNamingFiles())
      if (f.path == kBuiltinPath)
        if (auto parsed = Parse(f.text, f.path); parsed.ok()) return std::move(parsed.value());
    return KeyMapping();
  }();
  return mapping;
}

Result<KeyMapping> KeyMapping::Parse(std::string_view json, std::string_view path) {
  PB_ASSIGN_OR_RETURN(auto doc, ParseJson(json, path));
  RuleParser parser(path);
  if (!doc.is_object()) return parser.Fail("(document)", "must be an object");
  KeyMapping out;
  if (auto v = doc.find("transformers_version"); v != doc.end() && v->is_string()) out.version_ = v->get<std::string>();
  else return parser.Fail("transformers_version", "must be a string");
  if (auto legacy = doc.find("legacy"); legacy != doc.end()) {
    PB_ASSIGN_OR_RETURN(out.legacy_, parser.ParseList(*legacy, "legacy"));
  }
  auto named = [&](const char* field, std::vector<Named>& into, bool nested) -> Status {
    auto obj = doc.find(field);
    if (obj == doc.end()) return Status::Ok();
    if (!obj->is_object()) return parser.Fail(field, "must be an object");
    for (const auto& [name, value] : obj->items()) {
      const std::string where = std::string(field) + "." + name;
      const Json* list = &value;
      std::string model_type = name;
      if (nested) {
        if (!value.is_object() || !value.contains("rules") || !value.contains("model_type") ||
            !value["model_type"].is_string())
          return parser.Fail(where, "must be an object with \"model_type\" and \"rules\"");
        list = &value["rules"];
        model_type = value["model_type"].get<std::string>();
      }
      PB_ASSIGN_OR_RETURN(auto rules, parser.ParseList(*list, where));
      into.push_back({name, std::move(rules), model_type});
    }
    return Status::Ok();
  };
  if (auto s = named("model_types", out.model_types_, false); !s.ok()) return s.error();
  if (auto s = named("architectures", out.architectures_, true); !s.ok()) return s.error();
  if (auto p = doc.find("base_model_prefix"); p != doc.end()) {
    if (!p->is_object()) return parser.Fail("base_model_prefix", "must be an object of strings");
    for (const auto& [type, prefix] : p->items()) {
      if (!prefix.is_string()) return parser.Fail("base_model_prefix." + type, "must be a string");
      out.base_model_prefixes_.emplace_back(type, prefix.get<std::string>());
    }
  }
  return out;
}

std::vector<std::string> KeyMapping::model_types() const {
  std::vector<std::string> out;
  for (const auto& n : model_types_) out.push_back(n.name);
  return out;
}

std::vector<std::string> KeyMapping::architectures() const {
  std::vector<std::string> out;
  for (const auto& n : architectures_) out.push_back(n.name);
  return out;
}

std::optional<KeyRules> KeyMapping::Select(const Named* entry, std::string selected_by) const {
  if (!entry) return std::nullopt;
  KeyRules out{std::move(selected_by), {}, {}};
  for (const auto& [type, prefix] : base_model_prefixes_)
    if (type == entry->model_type) out.base_model_prefix = prefix;
  // transformers' load appends the legacy renames (get_model_conversion_mapping's add_legacy) to the model's.
  for (const auto& r : entry->rules) out.rules.push_back(&r);
  for (const auto& r : legacy_) out.rules.push_back(&r);
  return out;
}

std::optional<KeyRules> KeyMapping::ForModelType(std::string_view model_type) const {
  auto it =
      std::find_if(model_types_.begin(), model_types_.end(), [&](const Named& n) { return n.name == model_type; });
  return Select(it == model_types_.end() ? nullptr : &*it, "model_type " + std::string(model_type));
}

std::optional<KeyRules> KeyMapping::ForArchitecture(std::string_view architecture) const {
  auto it = std::find_if(architectures_.begin(), architectures_.end(),
                         [&](const Named& n) { return n.name == architecture; });
  return Select(it == architectures_.end() ? nullptr : &*it, "architecture " + std::string(architecture));
}

std::optional<KeyRules> KeyMapping::ForConfig(std::string_view config_json) const {
  auto parsed = ParseJson(config_json, "config.json");
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  const Json& j = parsed.value();
  if (auto a = j.find("architectures"); a != j.end() && a->is_array() && !a->empty() && a->front().is_string())
    if (auto rules = ForArchitecture(a->front().get<std::string>())) return rules;
  if (auto t = j.find("model_type"); t != j.end() && t->is_string())
    if (auto rules = ForModelType(t->get<std::string>())) return rules;
  // Every model transformers loads gets the legacy renames (LayerNorm.gamma -> LayerNorm.weight...).
  if (legacy_.empty()) return std::nullopt;
  Named none{"", {}, ""};
  return Select(&none, "legacy renames");
}

}  // namespace pb::adapter
