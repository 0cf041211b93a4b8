#include "adapter/naming_tables.h"

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <string_view>
#include <unordered_map>

#include "core/json.h"

namespace pb::adapter {
namespace {


constexpr std::string_view kLayer = "{N}";

// ---- Templates -------------------------------------------------------------------------------------------
// A template holds at most one "{N}" (checked when a table is parsed), so matching needs no backtracking:
// the literal text before and after it is anchored at both ends and what lies between must be a layer index.

// A layer index as HF writes it: decimal digits, no sign, no leading zero (so that filling the template back
// in gives the same text), at most 18 digits (fits uint64_t).
std::optional<uint64_t> ParseLayer(std::string_view s) {
  if (s.empty() || s.size() > 18 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// With `underscored`, a '.' of the template matches '_' as well as '.' (kohya-style names lose their dots).
bool LiteralEq(std::string_view tmpl, std::string_view text, bool underscored) {
  if (tmpl.size() != text.size()) return false;
  for (size_t i = 0; i < tmpl.size(); ++i)
    if (tmpl[i] != text[i] && !(underscored && tmpl[i] == '.' && text[i] == '_')) return false;
  return true;
}

struct Fit {
  bool matched = false;
  std::optional<uint64_t> layer;
};

Fit MatchTemplate(std::string_view tmpl, std::string_view text, bool underscored = false) {
  size_t at = tmpl.find(kLayer);
  if (at == std::string_view::npos) return {LiteralEq(tmpl, text, underscored), std::nullopt};
  std::string_view before = tmpl.substr(0, at), after = tmpl.substr(at + kLayer.size());
  if (text.size() <= before.size() + after.size()) return {};
  if (!LiteralEq(before, text.substr(0, before.size()), underscored) ||
      !LiteralEq(after, text.substr(text.size() - after.size()), underscored))
    return {};
  auto layer = ParseLayer(text.substr(before.size(), text.size() - before.size() - after.size()));
  if (!layer) return {};
  return {true, layer};
}

std::string Fill(std::string_view tmpl, std::optional<uint64_t> layer) {
  std::string out(tmpl);
  size_t at = out.find(kLayer);
  if (at != std::string::npos) out.replace(at, kLayer.size(), layer ? std::to_string(*layer) : std::string());
  return out;
}

bool HasLayer(std::string_view tmpl) { return tmpl.find(kLayer) != std::string_view::npos; }

ModuleMatch MakeMatch(const ArchTable& arch, const ModuleTemplate& t, std::string_view prefix,
                      std::optional<uint64_t> layer) {
  ModuleMatch m;
  m.arch = &arch;
  m.tmpl = &t;
  m.prefix = std::string(prefix);
  m.layer = layer;
  m.hf = m.prefix + Fill(t.hf, layer);
  m.canonical = Fill(t.canonical, layer);
  if (t.gguf) m.gguf = Fill(*t.gguf, layer);
  return m;
}

// ---- Table parsing ---------------------------------------------------------------------------------------
// Every accessor is guarded by a type check first: the WASM build has no exceptions, and nlohmann's
// accessors throw (abort) on a type mismatch.

constexpr std::pair<ModuleKind, std::string_view> kKinds[] = {{ModuleKind::kLinear, "linear"},
                                                              {ModuleKind::kConv1D, "conv1d"},
                                                              {ModuleKind::kEmbedding, "embedding"},
                                                              {ModuleKind::kConv2d, "conv2d"},
                                                              {ModuleKind::kOther, "other"}};

// Collects the first problem found, as "<file>: <field>: <what>".
class TableParser {
 public:
  explicit TableParser(std::string_view path) : path_(path) {}

  Result<ArchTable> Parse(std::string_view text) {
    ArchTable t;
    t.name = Stem(path_);
    auto parsed = ParseJson(text, path_);
    if (!parsed.ok()) return *(error_ = parsed.error());  // "<file>: not valid JSON at byte …"
    const Json& doc = parsed.value();
    if (!doc.is_object()) return Fail("", "a table must be a JSON object");
    if (!KnownKeys(
            doc, "",
            {"note", "model_types", "architectures", "gguf_arch", "body_prefixes", "detect_priority", "modules"}) ||
        !Note(doc, "") || !Strings(doc, "model_types", t.model_types) ||
        !Strings(doc, "architectures", t.architectures) || !Strings(doc, "body_prefixes", t.body_prefixes))
      return *error_;
    if (t.body_prefixes.empty()) return Fail("body_prefixes", "must list at least one prefix (\"\" for none)");
    // Every module path is tried against every template under every prefix: bounded, so that a table cannot
    // make a lookup cost more than kMaxTemplates × kMaxBodyPrefixes template matches.
    if (t.body_prefixes.size() > kMaxBodyPrefixes)
      return Fail("body_prefixes", "lists " + std::to_string(t.body_prefixes.size()) + " prefixes; at most " +
                                       std::to_string(kMaxBodyPrefixes));
    for (size_t i = 0; i < t.body_prefixes.size(); ++i) {
      const std::string& p = t.body_prefixes[i];
      if (!p.empty() && (p.back() != '.' || p.front() == '.' || p.find(kLayer) != std::string::npos))
        return Fail("body_prefixes[" + std::to_string(i) + "]", "\"" + p + "\" must be empty or end with '.'");
    }
    if (auto it = doc.find("gguf_arch"); it != doc.end() && !it->is_null()) {
      if (!it->is_string() || it->get_ref<const std::string&>().empty())
        return Fail("gguf_arch", "must be a non-empty string (or absent: llama.cpp has no such architecture)");
      t.gguf_arch = it->get_ref<const std::string&>();
    }
    if (auto it = doc.find("detect_priority"); it != doc.end()) {
      bool in_range = it->is_number_unsigned()  ? it->get<uint64_t>() <= 1000
                      : it->is_number_integer() ? it->get<int64_t>() >= -1000
                                                : false;
      if (!in_range) return Fail("detect_priority", "must be an integer from -1000 to 1000");
      t.detect_priority = static_cast<int>(it->get<int64_t>());
    }
    auto modules = doc.find("modules");
    if (modules == doc.end() || !modules->is_array() || modules->empty())
      return Fail("modules", "must be a non-empty array of module objects");
    if (modules->size() > kMaxTemplates)
      return Fail("modules", "lists " + std::to_string(modules->size()) + " module templates; at most " +
                                 std::to_string(kMaxTemplates) + " (the largest built-in table has 30)");
    for (size_t i = 0; i < modules->size(); ++i) {
      auto m = Module((*modules)[i], "modules[" + std::to_string(i) + "]");
      if (!m) return *error_;
      t.modules.push_back(std::move(*m));
    }
    if (!CheckConsistent(t)) return *error_;
    return t;
  }

 private:
  static std::string Stem(std::string_view path) {
    size_t slash = path.find_last_of('/');
    std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
    if (name.ends_with(".json")) name.remove_suffix(5);
    return std::string(name);
  }

  Error Fail(const std::string& field, const std::string& what) {
    error_ =
        MakeError(ErrorCode::InvalidConfig, std::string(path_) + ": " + (field.empty() ? "" : field + ": ") + what);
    return *error_;
  }

  // Unknown keys are rejected so that a misspelt optional field ("gguf_permutation") is not silently ignored.
  bool KnownKeys(const Json& obj, const std::string& where, std::initializer_list<std::string_view> keys) {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        Fail(where + (where.empty() ? "" : ".") + key, "unknown field");
        return false;
      }
    }
    return true;
  }

  bool Note(const Json& obj, const std::string& where) {
    auto it = obj.find("note");
    if (it == obj.end() || it->is_string()) return true;
    Fail(where + (where.empty() ? "" : ".") + "note", "must be a string");
    return false;
  }

  bool Strings(const Json& obj, const char* key, std::vector<std::string>& out) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_array()) {
      Fail(key, "must be an array of strings");
      return false;
    }
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) {
        Fail(std::string(key) + "[" + std::to_string(i) + "]", "must be a string");
        return false;
      }
      out.push_back((*it)[i].get_ref<const std::string&>());
    }
    return true;
  }

  // A template string: non-empty, at most one {N}, no '{' or '}' otherwise.
  std::optional<std::string> Template(const Json& obj, const std::string& where, const char* key, bool required) {
    auto it = obj.find(key);
    std::string field = where + "." + key;
    if (it == obj.end() || it->is_null()) {
      if (required) Fail(field, "is required");
      return std::nullopt;
    }
    if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
      Fail(field, "must be a non-empty string");
      return std::nullopt;
    }
    const std::string& s = it->get_ref<const std::string&>();
    std::string rest = s;
    if (size_t at = rest.find(kLayer); at != std::string::npos) rest.erase(at, kLayer.size());
    if (rest.find_first_of("{}") != std::string::npos) {
      Fail(field, "\"" + s + "\" may hold one {N} and no other braces");
      return std::nullopt;
    }
    return s;
  }

  std::optional<ModuleTemplate> Module(const Json& m, const std::string& where) {
    if (!m.is_object()) {
      Fail(where, "must be an object");
      return std::nullopt;
    }
    if (!KnownKeys(m, where, {"hf", "head", "canonical", "gguf", "kind", "gguf_permute", "tied_to", "fused", "note"}) ||
        !Note(m, where))
      return std::nullopt;
    ModuleTemplate t;
    auto hf = Template(m, where, "hf", true);
    if (!hf) return std::nullopt;
    t.hf = *hf;
    if (t.hf.front() == '.' || t.hf.back() == '.') {
      Fail(where + ".hf", "\"" + t.hf + "\" must not start or end with '.'");
      return std::nullopt;
    }
    if (auto it = m.find("head"); it != m.end()) {
      if (!it->is_boolean()) {
        Fail(where + ".head", "must be true or false");
        return std::nullopt;
      }
      t.head = it->get<bool>();
    }
    auto canonical = Template(m, where, "canonical", true);
    if (!canonical) return std::nullopt;
    t.canonical = *canonical;
    t.gguf = Template(m, where, "gguf", false);
    if (error_) return std::nullopt;
    if (t.gguf && t.gguf->ends_with(".weight")) {
      Fail(where + ".gguf", "is the tensor's base name, without \".weight\"");
      return std::nullopt;
    }
    // {N} must appear in all three names or in none, or a name could not be rebuilt from another.
    bool layered = HasLayer(t.hf);
    if (HasLayer(t.canonical) != layered || (t.gguf && HasLayer(*t.gguf) != layered)) {
      Fail(where, "hf, canonical and gguf must each hold {N} once, or none of them");
      return std::nullopt;
    }
    auto kind = m.find("kind");
    if (kind == m.end() || !kind->is_string()) {
      Fail(where + ".kind", "is required: one of linear, conv1d, embedding, conv2d, other");
      return std::nullopt;
    }
    auto k = std::find_if(std::begin(kKinds), std::end(kKinds),
                          [&](const auto& p) { return p.second == kind->get_ref<const std::string&>(); });
    if (k == std::end(kKinds)) {
      Fail(where + ".kind",
           "\"" + kind->get_ref<const std::string&>() + "\" is not one of linear, conv1d, embedding, conv2d, other");
      return std::nullopt;
    }
    t.kind = k->first;
    if (auto it = m.find("tied_to"); it != m.end()) {
      if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
        Fail(where + ".tied_to", "must be the non-empty hf path of the module whose weight this one shares");
        return std::nullopt;
      }
      t.tied_to = it->get_ref<const std::string&>();
    }
    if (auto it = m.find("fused"); it != m.end()) {
      if (!it->is_array() || it->size() < 2) {
        Fail(where + ".fused", "must be an array of at least two role names, in row order");
        return std::nullopt;
      }
      for (size_t i = 0; i < it->size(); ++i) {
        if (!(*it)[i].is_string() || (*it)[i].get_ref<const std::string&>().empty()) {
          Fail(where + ".fused[" + std::to_string(i) + "]", "must be a non-empty string");
          return std::nullopt;
        }
        t.fused.push_back((*it)[i].get_ref<const std::string&>());
      }
    }
    if (auto it = m.find("gguf_permute"); it != m.end() && !it->is_null()) {
      std::string field = where + ".gguf_permute";
      if (!it->is_object() || !KnownKeys(*it, field, {"kind", "heads"})) {
        if (!error_) Fail(field, "must be an object {\"kind\", \"heads\"}");
        return std::nullopt;
      }
      if (!t.gguf) {
        Fail(field, "needs a gguf name: it describes how llama.cpp writes that tensor");
        return std::nullopt;
      }
      auto pk = it->find("kind");
      auto kind = pk != it->end() && pk->is_string() ? ParseRowPermutationKind(pk->get_ref<const std::string&>())
                                                     : std::nullopt;
      if (!kind) {
        Fail(field + ".kind", "must be one of llama_rope, falcon_qkv, gptneox_qkv");
        return std::nullopt;
      }
      auto ph = it->find("heads");
      auto heads = ph != it->end() && ph->is_string() ? ParseHeadCountField(ph->get_ref<const std::string&>())
                                                      : std::nullopt;
      if (!heads) {
        Fail(field + ".heads", "must be num_attention_heads or num_key_value_heads");
        return std::nullopt;
      }
      t.gguf_permute = RowPermutation{*kind, *heads};
    }
    return t;
  }

  // Lookups by any of the three names must be unambiguous. Two templates may share a canonical name only if
  // they are variants of one role that no model has together (T5's wi / wi_1): then they share the GGUF name
  // and the kind too, and lookups by those names return the first listed.
  //
  // The error names the first pair (i, j < i), in the order i, then j, then the three rules, that breaks a
  // rule. One pass with hash maps finds it, in linear time (a user table may list 20,000 modules): while no
  // rule is broken, every earlier template sharing a canonical name shares its gguf name, kind and head flag,
  // and every earlier one sharing a gguf name shares its canonical name, so for template i only the FIRST
  // earlier template with its hf (per head flag), its canonical name or its gguf name can break a rule, and
  // the smallest of those is the j to report.
  bool CheckConsistent(const ArchTable& t) {
    std::unordered_map<std::string_view, size_t> first_hf[2], first_canonical, first_gguf;
    for (size_t i = 0; i < t.modules.size(); ++i) {
      const ModuleTemplate& b = t.modules[i];
      size_t j = i;  // the first earlier template that breaks a rule with b, or i for none
      auto [hf, new_hf] = first_hf[b.head ? 1 : 0].try_emplace(b.hf, i);
      if (!new_hf) j = std::min(j, hf->second);
      auto [canonical, new_canonical] = first_canonical.try_emplace(b.canonical, i);
      if (!new_canonical) {
        const ModuleTemplate& a = t.modules[canonical->second];
        if (a.gguf != b.gguf || a.kind != b.kind || a.head != b.head) j = std::min(j, canonical->second);
      }
      if (b.gguf) {
        auto [gguf, new_gguf] = first_gguf.try_emplace(*b.gguf, i);
        if (!new_gguf && t.modules[gguf->second].canonical != b.canonical) j = std::min(j, gguf->second);
      }
      if (j != i) return ReportInconsistency(t.modules[j], b, j, i);
    }
    return true;
  }

  // The error for templates a = modules[j] and b = modules[i] (j < i), which break at least one rule: the
  // first one broken.
  bool ReportInconsistency(const ModuleTemplate& a, const ModuleTemplate& b, size_t j, size_t i) {
    std::string field = "modules[" + std::to_string(i) + "]";
    std::string other = "modules[" + std::to_string(j) + "]";
    if (a.head == b.head && a.hf == b.hf) {
      Fail(field + ".hf", "\"" + b.hf + "\" repeats " + other);
    } else if (a.canonical == b.canonical && (a.gguf != b.gguf || a.kind != b.kind || a.head != b.head)) {
      Fail(field + ".canonical",
           "\"" + b.canonical + "\" repeats " + other + " with another gguf name, kind or head flag");
    } else {
      Fail(field + ".gguf", "\"" + *b.gguf + "\" repeats " + other + " under another canonical name");
    }
    return false;
  }

  std::string_view path_;
  std::optional<Error> error_;
};

}  // namespace

std::string_view ModuleKindName(ModuleKind kind) {
  for (const auto& [k, name] : kKinds)
    if (k == kind) return name;
  return "other";
}

const NamingTables& NamingTables::Builtin() {
  static const NamingTables tables = [] {
    std::vector<EmbeddedFile> arch_files;
    for (const auto& f : EmbeddedNamingFiles())
      if (f.path.starts_with("arch/")) arch_files.push_back(f);
    auto parsed = Parse(arch_files);
    // The shipped tables are tested (naming_tables_test.cc); a broken one leaves the builtin set empty rather
    // than half-loaded.
    return parsed.ok() ? std::move(parsed.value()) : NamingTables();
  }();
  return tables;
}

Result<NamingTables> NamingTables::Parse(std::span<const EmbeddedFile> files) {
  NamingTables out;
  for (const auto& f : files) {
    PB_ASSIGN_OR_RETURN(auto t, TableParser(f.path).Parse(f.text));
    for (const auto& existing : out.arches_)
      if (existing.name == t.name)
        return MakeError(ErrorCode::InvalidConfig,
                         std::string(f.path) + ": a table named \"" + t.name + "\" is already listed");
    out.arches_.push_back(std::move(t));
  }
  return out;
}

Status NamingTables::Add(std::span<const EmbeddedFile> files) {
  PB_ASSIGN_OR_RETURN(auto parsed, Parse(files));
  for (auto& t : parsed.arches_) {
    auto same = std::find_if(arches_.begin(), arches_.end(), [&](const ArchTable& a) { return a.name == t.name; });
    if (same != arches_.end()) *same = std::move(t);
    else arches_.push_back(std::move(t));
  }
  return Status::Ok();
}

const ArchTable* NamingTables::Find(std::string_view name) const {
  auto contains = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), name) != v.end(); };
  for (const auto& a : arches_)
    if (a.name == name) return &a;
  for (const auto& a : arches_)
    if (contains(a.model_types)) return &a;
  for (const auto& a : arches_)
    if (contains(a.architectures)) return &a;
  return nullptr;
}

const ArchTable* NamingTables::FromModelConfig(std::string_view config_json) const {
  auto parsed = ParseJson(config_json, "config.json");  // callers that need its errors parse it first
  if (!parsed.ok() || !parsed->is_object()) return nullptr;
  const Json& doc = parsed.value();
  // `architectures` names the exact class (Qwen2ForCausalLM); model_type is the fallback for configs
  // written without it.
  if (auto it = doc.find("architectures"); it != doc.end() && it->is_array()) {
    for (const auto& entry : *it) {
      if (!entry.is_string()) continue;
      for (const auto& a : arches_)
        if (std::find(a.architectures.begin(), a.architectures.end(), entry.get_ref<const std::string&>()) !=
            a.architectures.end())
          return &a;
    }
  }
  if (auto it = doc.find("model_type"); it != doc.end() && it->is_string()) {
    for (const auto& a : arches_)
      if (std::find(a.model_types.begin(), a.model_types.end(), it->get_ref<const std::string&>()) !=
          a.model_types.end())
        return &a;
  }
  return nullptr;
}

const ArchTable* NamingTables::Detect(std::span<const std::string> module_paths) const {
  const ArchTable* best = nullptr;
  size_t best_count = 0;
  for (const auto& a : arches_) {
    size_t count = 0;
    for (const auto& path : module_paths)
      if (MatchHf(a, path)) ++count;
    if (count > best_count || (count == best_count && count > 0 && a.detect_priority > best->detect_priority)) {
      best = &a;
      best_count = count;
    }
  }
  return best;
}

std::optional<ModuleMatch> NamingTables::MatchHf(const ArchTable& arch, std::string_view hf_module_path) const {
  for (const auto& t : arch.modules) {
    if (t.head) {
      if (Fit f = MatchTemplate(t.hf, hf_module_path); f.matched) return MakeMatch(arch, t, "", f.layer);
      continue;
    }
    for (const auto& prefix : arch.body_prefixes) {
      if (!hf_module_path.starts_with(prefix)) continue;
      if (Fit f = MatchTemplate(t.hf, hf_module_path.substr(prefix.size())); f.matched)
        return MakeMatch(arch, t, prefix, f.layer);
    }
  }
  return std::nullopt;
}

std::optional<ModuleMatch> NamingTables::FromCanonical(const ArchTable& arch, std::string_view canonical,
                                                       std::string_view prefix) const {
  if (std::find(arch.body_prefixes.begin(), arch.body_prefixes.end(), prefix) == arch.body_prefixes.end())
    return std::nullopt;
  for (const auto& t : arch.modules)
    if (Fit f = MatchTemplate(t.canonical, canonical); f.matched)
      return MakeMatch(arch, t, t.head ? "" : prefix, f.layer);
  return std::nullopt;
}

std::optional<ModuleMatch> NamingTables::FromGguf(const ArchTable& arch, std::string_view gguf_name,
                                                  std::string_view prefix) const {
  if (std::find(arch.body_prefixes.begin(), arch.body_prefixes.end(), prefix) == arch.body_prefixes.end())
    return std::nullopt;
  if (gguf_name.ends_with(".weight")) gguf_name.remove_suffix(7);  // tolerate the full tensor name
  for (const auto& t : arch.modules) {
    if (!t.gguf) continue;
    if (Fit f = MatchTemplate(*t.gguf, gguf_name); f.matched) return MakeMatch(arch, t, t.head ? "" : prefix, f.layer);
  }
  return std::nullopt;
}

std::optional<ModuleMatch> NamingTables::FromUnderscored(const ArchTable& arch, std::string_view underscored) const {
  std::optional<ModuleMatch> found;
  auto consider = [&](const ModuleTemplate& t, std::string_view prefix, std::string_view rest) {
    Fit f = MatchTemplate(t.hf, rest, /*underscored=*/true);
    if (!f.matched) return true;
    ModuleMatch m = MakeMatch(arch, t, prefix, f.layer);
    if (found && found->hf != m.hf) return false;  // two different modules read the same underscored: ambiguous
    if (!found) found = std::move(m);
    return true;
  };
  for (const auto& t : arch.modules) {
    if (t.head) {
      if (!consider(t, "", underscored)) return std::nullopt;
      continue;
    }
    for (const auto& prefix : arch.body_prefixes) {
      if (underscored.size() < prefix.size() || !LiteralEq(prefix, underscored.substr(0, prefix.size()), true))
        continue;
      if (!consider(t, prefix, underscored.substr(prefix.size()))) return std::nullopt;
    }
  }
  return found;
}

}  // namespace pb::adapter
