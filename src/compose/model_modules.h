// The modules of a model as PEFT sees them, from its safetensors headers alone, and PEFT's rules for picking
// some of them. Shared by `create` (a fresh adapter's layers) and `extract` (the layers a fine-tune changed):
//  - a module is every tensor name without its last component, and every dotted prefix of those (containers);
//  - its kind (nn.Linear, Conv1D, embedding, output head) comes from the naming table of the model (config.json,
//    --arch, else detected from the paths);
//  - a list entry matches a module whose path equals it or ends with `.entry` (PEFT's list rule); "all-linear"
//    is every nn.Linear / Conv1D but the output embedding; a regex must match the whole path (re.fullmatch).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "adapter/naming_tables.h"
#include "core/header.h"
#include "core/result.h"

namespace pb::compose {

struct ModelModule {
  std::optional<size_t> shard, weight;  // its own `.weight` tensor (shard, index in that shard's header)
  bool container = false;               // a prefix of another module
};

struct ModuleKindInfo {
  adapter::ModuleKind kind = adapter::ModuleKind::kLinear;
  bool known = false;        // the naming table says so (else an nn.Linear is assumed)
  bool output_head = false;  // the table's head/lm module (lm_head)
};

class ModelModules {
 public:
  // Errors: InvalidArgument (no tensor with a module name; an unknown `arch`).
  static Result<ModelModules> Read(const std::vector<const Header*>& shards, const std::optional<std::string>& config,
                                   const std::optional<std::string>& arch, const adapter::NamingTables& tables);

  const std::map<std::string, ModelModule>& modules() const { return modules_; }
  const adapter::ArchTable* table() const { return table_; }
  ModuleKindInfo KindOf(const std::string& path) const;
  // The module's `.weight`, when it has one.
  std::optional<TensorInfo> WeightOf(const std::string& path) const;

  // The modules `selector` picks, in path (map) order. `flag` names the option in messages (--target-modules).
  // Errors: InvalidArgument (an entry matching nothing, all-linear without module types), InvalidConfig (a regex
  // PEFT's re would reject).
  struct Selector {
    std::vector<std::string> names;
    bool all_linear = false;
    std::optional<std::string> regex;
  };
  Result<std::vector<std::string>> Select(const Selector& selector, std::string_view flag) const;

  // target_modules as PEFT saves it for this set of full paths: the set itself, or PEFT's minimal suffixes
  // (_find_minimal_target_modules) when it has 20 entries or more.
  std::vector<std::string> SavedTargetModules(const std::set<std::string>& targets) const;

 private:
  std::vector<const Header*> shard_headers_;
  std::map<std::string, ModelModule> modules_;
  const adapter::ArchTable* table_ = nullptr;
  const adapter::NamingTables* tables_ = nullptr;
};

// PEFT's list rule: `name` is `entry` or ends with `.entry`.
bool ListMatches(std::string_view name, std::string_view entry);
// "a, b, c, … (N in all)".
std::string ListText(const std::vector<std::string>& names, size_t limit = 12);

}  // namespace pb::compose
