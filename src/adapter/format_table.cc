#include "adapter/format_table.h"

#include <algorithm>
#include <array>
#include "core/json.h"

#include "adapter/naming_tables.h"

namespace pb::adapter {

namespace {

struct RoleName {
  FormatRole role;
  std::string_view name;
};
constexpr std::array<RoleName, 7> kRoleNames = {{
    {FormatRole::kLoraA, "lora_A"},
    {FormatRole::kLoraB, "lora_B"},
    {FormatRole::kLoraBBias, "lora_B_bias"},
    {FormatRole::kEmbeddingA, "embedding_A"},
    {FormatRole::kEmbeddingB, "embedding_B"},
    {FormatRole::kMagnitude, "magnitude"},
    {FormatRole::kAlpha, "alpha"},
}};

Error Bad(std::string_view path, const std::string& what) {
  return MakeError(ErrorCode::InvalidConfig, "format table " + std::string(path) + ": " + what);
}

std::optional<std::string> StringField(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

std::string_view FormatName(AdapterFormat format) {
  switch (format) {
    case AdapterFormat::kPeft: return "peft";
    case AdapterFormat::kMlx: return "mlx";
    case AdapterFormat::kKohya: return "kohya";
    case AdapterFormat::kGgufNames: return "gguf-names";
    case AdapterFormat::kDiffusersAttnProc: return "diffusers-attnproc";
    case AdapterFormat::kGguf: return "gguf";
  }
  return "?";
}

std::optional<AdapterFormat> ParseFormatName(std::string_view name) {
  for (AdapterFormat f : {AdapterFormat::kPeft, AdapterFormat::kMlx, AdapterFormat::kKohya, AdapterFormat::kGgufNames,
                          AdapterFormat::kDiffusersAttnProc, AdapterFormat::kGguf})
    if (FormatName(f) == name) return f;
  return std::nullopt;
}

const RoleSpelling* FormatTable::Find(FormatRole role) const {
  for (const auto& r : roles)
    if (r.role == role) return &r;
  return nullptr;
}

Result<FormatTable> ParseFormatTable(std::string_view path, std::string_view json_text) {
  PB_ASSIGN_OR_RETURN(auto parsed, ParseJson(json_text, "format table " + std::string(path)));
  const Json& j = parsed;
  if (!j.is_object()) return Bad(path, "not a JSON object");
  FormatTable t;
  auto name = StringField(j, "format");
  if (!name || !ParseFormatName(*name))
    return Bad(path, "`format` must be peft, mlx, kohya, gguf-names, diffusers-attnproc or gguf");
  t.format = *ParseFormatName(*name);
  auto weights = StringField(j, "weights_file");
  if (!weights) return Bad(path, "`weights_file` must be a string");
  t.weights_file = *weights;
  t.config_file = StringField(j, "config_file");
  auto prefixes = j.find("prefixes");
  if (prefixes == j.end() || !prefixes->is_array() || prefixes->empty())
    return Bad(path, "`prefixes` must be a non-empty list of strings");
  for (const auto& p : *prefixes) {
    if (!p.is_string()) return Bad(path, "`prefixes` must be a non-empty list of strings");
    t.prefixes.push_back(p.get<std::string>());
  }
  t.write_prefix = StringField(j, "write_prefix");
  auto style = StringField(j, "path_style").value_or("");
  if (style == "dotted") t.path_style = PathStyle::kDotted;
  else if (style == "underscore") t.path_style = PathStyle::kUnderscore;
  else if (style == "gguf") t.path_style = PathStyle::kGguf;
  else return Bad(path, "`path_style` must be dotted, underscore or gguf");
  auto meta = j.find("metadata");
  if (meta != j.end() && meta->is_object()) {
    Metadata m;
    for (const auto& [k, v] : meta->items()) {
      if (!v.is_string()) return Bad(path, "`metadata` values must be strings");
      m.emplace_back(k, v.get<std::string>());
    }
    t.metadata = std::move(m);
  }
  if (auto rw = j.find("path_rewrites"); rw != j.end() && !rw->is_null()) {
    if (!rw->is_array()) return Bad(path, "`path_rewrites` must be a list of [from, to] pairs");
    for (const auto& pair : *rw) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string() ||
          pair[0].get<std::string>().empty())
        return Bad(path, "`path_rewrites` must be a list of [from, to] pairs of strings");
      t.path_rewrites.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
    }
  }
  auto roles = j.find("roles");
  if (roles == j.end() || !roles->is_object()) return Bad(path, "`roles` must be an object");
  for (const auto& item : roles->items()) {
    const std::string role_name = item.key();  // a plain variable: clang 14 cannot capture structured bindings
    const auto& spec = item.value();
    auto known =
        std::find_if(kRoleNames.begin(), kRoleNames.end(), [&](const RoleName& r) { return r.name == role_name; });
    if (known == kRoleNames.end()) return Bad(path, "unknown role `" + role_name + "`");
    auto suffix = spec.is_object() ? StringField(spec, "suffix") : std::nullopt;
    if (!suffix || suffix->empty()) return Bad(path, "role `" + role_name + "` needs a non-empty `suffix`");
    RoleSpelling r{known->role, *suffix, false};
    if (spec.contains("transpose")) {
      if (!spec["transpose"].is_boolean()) return Bad(path, "role `" + role_name + "`: `transpose` must be a boolean");
      r.transpose = spec["transpose"].get<bool>();
    }
    t.roles.push_back(std::move(r));
  }
  // Longest suffix first; stable, so roles sharing a suffix keep the table's order.
  std::stable_sort(t.roles.begin(), t.roles.end(),
                   [](const RoleSpelling& a, const RoleSpelling& b) { return a.suffix.size() > b.suffix.size(); });
  return t;
}

const FormatTable& BuiltinFormatTable(AdapterFormat format) {
  static const std::array<FormatTable, kAdapterFormatCount> tables = [] {
    std::array<FormatTable, kAdapterFormatCount> out{};
    std::array<bool, kAdapterFormatCount> found{};
    for (const auto& file : EmbeddedNamingFiles()) {
      if (!file.path.starts_with("formats/")) continue;
      auto t = ParseFormatTable(file.path, file.text);
      // A unit test parses every shipped table, so a broken one cannot ship; skip rather than abort.
      if (!t.ok()) continue;
      size_t i = static_cast<size_t>(t->format);
      out[i] = std::move(t.value());
      found[i] = true;
    }
    for (size_t i = 0; i < out.size(); ++i)
      if (!found[i]) out[i].format = static_cast<AdapterFormat>(i);
    return out;
  }();
  return tables[static_cast<size_t>(format)];
}

std::optional<FormatKey> SplitFormatKey(const FormatTable& table, std::string_view key) {
  for (const auto& prefix : table.prefixes) {
    if (!key.starts_with(prefix)) continue;
    std::string_view rest = key.substr(prefix.size());
    for (const auto& r : table.roles) {
      if (rest.size() > r.suffix.size() && rest.ends_with(r.suffix))
        return FormatKey{prefix, std::string(rest.substr(0, rest.size() - r.suffix.size())), &r};
    }
  }
  return std::nullopt;
}

std::string RewritePath(const FormatTable& table, std::string path) {
  for (const auto& [from, to] : table.path_rewrites)
    if (size_t at = path.find(from); at != std::string::npos) path.replace(at, from.size(), to);
  return path;
}

}  // namespace pb::adapter
