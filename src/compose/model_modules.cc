#include "compose/model_modules.h"

#include <algorithm>

#include "adapter/lora_config.h"
#include "adapter/module_select.h"
#include "text/python_json.h"
#include "core/json.h"
#include "core/utf8.h"

namespace pb::compose {
namespace {

Error Invalid(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }
std::string Quoted(std::string_view s) { return "`" + ClipForMessage(s) + "`"; }

std::string LeafName(std::string_view path) {
  size_t dot = path.rfind('.');
  return std::string(dot == std::string_view::npos ? path : path.substr(dot + 1));
}

// PEFT's _find_minimal_target_modules (tuners_utils.py), applied when target_modules has 20 entries or more.
std::set<std::string> MinimalTargetModules(const std::set<std::string>& targets, const std::set<std::string>& others) {
  auto suffixes = [](const std::string& s) {  // shortest first, as generate_suffixes(s)[::-1]
    std::vector<std::string> out{s};
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '.') out.push_back(s.substr(i + 1));
    std::reverse(out.begin(), out.end());
    return out;
  };
  std::set<std::string> other_suffixes;
  for (const auto& o : others)
    for (auto& s : suffixes(o)) other_suffixes.insert(std::move(s));
  std::vector<std::pair<std::vector<std::string>, std::string>> items;
  for (const auto& t : targets) items.push_back({suffixes(t), t});
  std::sort(items.begin(), items.end());  // Python sorts by the suffix lists
  std::set<std::string> required;
  for (const auto& [list, item] : items) {
    for (const auto& suffix : list) {
      if (required.count(suffix) || other_suffixes.count(suffix)) continue;
      bool covered = false;
      for (const auto& r : required)
        if (item.size() > r.size() && item.ends_with(r) && item[item.size() - r.size() - 1] == '.') covered = true;
      if (!covered) {
        required.insert(suffix);
        break;
      }
    }
  }
  return required.empty() ? targets : required;
}

}  // namespace

bool ListMatches(std::string_view name, std::string_view entry) {
  return name == entry ||
         (name.size() > entry.size() && name.ends_with(entry) && name[name.size() - entry.size() - 1] == '.');
}

std::string ListText(const std::vector<std::string>& names, size_t limit) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += ", … (" + std::to_string(names.size()) + " in all)";
  return out;
}

Result<ModelModules> ModelModules::Read(const std::vector<const Header*>& shards,
                                        const std::optional<std::string>& config,
                                        const std::optional<std::string>& arch, const adapter::NamingTables& tables) {
  ModelModules m;
  m.shard_headers_ = shards;
  m.tables_ = &tables;
  for (size_t s = 0; s < shards.size(); ++s) {
    const Header& h = *shards[s];
    for (size_t i = 0; i < h.tensor_count(); ++i) {
      const std::string name(h.tensor(i).name);
      size_t dot = name.rfind('.');
      if (dot == std::string::npos || dot == 0) continue;
      const std::string path = name.substr(0, dot);
      auto& module = m.modules_[path];
      if (name.substr(dot + 1) == "weight") {
        module.shard = s;
        module.weight = i;
      }
      for (size_t p = path.rfind('.'); p != std::string::npos && p > 0; p = path.rfind('.', p - 1)) {
        m.modules_[path.substr(0, p)].container = true;
        if (p == 0) break;
      }
    }
  }
  if (m.modules_.empty()) return Invalid("the base has no tensors with module names");
  if (arch) {
    m.table_ = tables.Find(*arch);
    if (!m.table_) return Invalid("unknown --arch " + Quoted(*arch));
  }
  if (!m.table_ && config) m.table_ = tables.FromModelConfig(*config);
  if (!m.table_) {
    std::vector<std::string> paths;
    for (const auto& [path, module] : m.modules_)
      if (module.weight) paths.push_back(path);
    m.table_ = tables.Detect(paths);
  }
  return m;
}

ModuleKindInfo ModelModules::KindOf(const std::string& path) const {
  if (table_)
    if (auto match = tables_->MatchHf(*table_, path))
      return {match->tmpl->kind, true, match->tmpl->head && match->tmpl->canonical == "head/lm"};
  return {};
}

std::optional<TensorInfo> ModelModules::WeightOf(const std::string& path) const {
  auto it = modules_.find(path);
  if (it == modules_.end() || !it->second.weight) return std::nullopt;
  return shard_headers_[*it->second.shard]->tensor(*it->second.weight);
}

Result<std::vector<std::string>> ModelModules::Select(const Selector& selector, std::string_view flag) const {
  const std::string option(flag);
  std::vector<std::string> selected;
  if (selector.all_linear) {
    if (!table_)
      return Invalid(option +
                     " all-linear needs the base's layer types, and no naming table fits this base "
                     "(no config.json naming a known architecture, none detected from its module paths): give --arch "
                     "or --naming-table, or name the modules");
    std::vector<std::string> unknown;
    for (const auto& [path, m] : modules_) {
      auto w = WeightOf(path);
      if (!w || w->shape.size() != 2) continue;
      ModuleKindInfo k = KindOf(path);
      if (!k.known) {
        unknown.push_back(path);
        continue;
      }
      if ((k.kind == adapter::ModuleKind::kLinear || k.kind == adapter::ModuleKind::kConv1D) && !k.output_head)
        selected.push_back(path);
    }
    if (!unknown.empty())
      return Invalid(option + " all-linear: the naming table `" + table_->name +
                     "` does not say which kind of "
                     "layer " +
                     std::to_string(unknown.size()) + " 2-D weight(s) belong to (" + ListText(unknown) +
                     "); name the modules instead");
  } else if (selector.regex) {
    // PEFT's own matcher, compiled as PEFT wraps a string target_modules (re.fullmatch).
    Json doc = adapter::DefaultLoraConfigDocument();
    doc["target_modules"] = *selector.regex;
    auto config = adapter::ParseLoraConfig(text::DumpPythonJson(doc));
    if (!config.ok()) return config.error();
    for (const auto& [path, m] : modules_) {
      auto hit = adapter::IsTargeted(config.value(), path);
      if (!hit) return Invalid(option + " " + Quoted(*selector.regex) + " cannot be matched");
      if (*hit) selected.push_back(path);
    }
    if (selected.empty())
      return Invalid(option + " " + Quoted(*selector.regex) +
                     " matches no module of the base (re.fullmatch "
                     "on the whole module name, as PEFT matches a string target_modules)");
  } else {
    std::vector<std::string> unmatched;
    for (const auto& entry : selector.names) {
      bool any = false;
      for (const auto& [path, m] : modules_)
        if (ListMatches(path, entry)) any = true;
      if (!any) unmatched.push_back(entry);
    }
    if (!unmatched.empty()) {
      std::set<std::string> leaves;
      for (const auto& [path, m] : modules_) {
        auto w = WeightOf(path);
        if (w && w->shape.size() == 2) leaves.insert(LeafName(path));
      }
      std::vector<std::string> shown;
      for (const auto& u : unmatched) shown.push_back(Quoted(u));
      return Invalid(option + ": " + ListText(shown) + (unmatched.size() == 1 ? " matches" : " match") +
                     " no module of the base (a name matches a module whose path is it or ends with `.` and it); "
                     "the base's layers with 2-D weights are named " +
                     ListText(std::vector<std::string>(leaves.begin(), leaves.end()), 40));
    }
    for (const auto& [path, m] : modules_)
      for (const auto& entry : selector.names)
        if (ListMatches(path, entry)) {
          selected.push_back(path);
          break;
        }
  }
  return selected;
}

std::vector<std::string> ModelModules::SavedTargetModules(const std::set<std::string>& targets) const {
  std::set<std::string> saved = targets;
  if (targets.size() >= 20) {
    std::set<std::string> others;
    for (const auto& [path, m] : modules_) {
      bool targeted = targets.count(path) > 0;
      for (const auto& t : targets) targeted = targeted || ListMatches(path, t);
      if (!targeted) others.insert(path);
    }
    auto minimal = MinimalTargetModules(targets, others);
    if (minimal.size() < targets.size()) saved = std::move(minimal);
  }
  return {saved.begin(), saved.end()};
}

}  // namespace pb::compose
