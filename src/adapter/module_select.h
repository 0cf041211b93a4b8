// Which modules a LoraConfig targets, and each module's rank, alpha and scaling, matched exactly the way
// PEFT matches them (../shared/reference/peft-semantics.md §2.4, §2.5, §3.1).
//
// Patterns are Python `re` syntax. They are translated to ECMAScript std::regex; constructs that differ
// between the two (named groups (?P<..>), lookbehind, \A \Z, possessive quantifiers, inline flags other than
// a leading (?i)...) are rejected when the config is parsed, so std::regex never sees a pattern it would
// throw on (the WASM build has no exceptions).
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <string_view>

#include "adapter/lora_config.h"
#include "core/result.h"

namespace pb::adapter {

// A Python regular expression, translated. Construct with CompilePythonRegex.
class PythonRegex {
 public:
  bool FullMatch(std::string_view text) const;  // re.fullmatch
  bool Match(std::string_view text) const;      // re.match (anchored at the start only)
  const std::string& source() const { return source_; }

 private:
  friend Result<PythonRegex> CompilePythonRegex(std::string_view pattern);
  std::string source_;
  std::regex regex_;
};

// InvalidConfig naming the construct when the pattern uses syntax with no ECMAScript equivalent or is
// malformed (unbalanced parentheses, a dangling escape...).
Result<PythonRegex> CompilePythonRegex(std::string_view pattern);

// Checks every regex a config holds (target_modules / exclude_modules strings, rank_pattern and
// alpha_pattern keys wrapped as PEFT wraps them). ParseLoraConfig calls this.
Status ValidateConfigPatterns(const LoraConfig& config);

// check_target_module_exists for a module name of the user's model (no "base_model.model." prefix):
// exclude_modules, then modules_to_save, then target_modules (list: exact or "." + suffix; regex:
// fullmatch), then layers_to_transform / layers_pattern (list form only, PEFT >= 0.20's lazy index rule).
// A null target_modules or "all-linear" cannot be decided from names alone: returns std::nullopt.
std::optional<bool> IsTargeted(const LoraConfig& config, std::string_view module_name);

struct ModuleSettings {
  int64_t r;
  double alpha;
  double scaling;  // alpha / r, or alpha / sqrt(r) with use_rslora, computed in double as PEFT does
  std::optional<std::string> rank_pattern_key;   // the pattern that set r, if any
  std::optional<std::string> alpha_pattern_key;  // the pattern that set alpha, if any
};

// Per-module r and alpha: the first rank_pattern key p (file order) with re.match("(.*\.)?(" + p + ")$",
// name), else config r; alpha independently from alpha_pattern, else lora_alpha (PEFT >= 0.15 rule).
ModuleSettings ResolveModuleSettings(const LoraConfig& config, std::string_view module_name);

}  // namespace pb::adapter
