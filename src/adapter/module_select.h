// Which modules a LoraConfig targets, and each module's rank, alpha and scaling, matched exactly the way
// PEFT matches them (docs/peft-semantics.md: "Module selection", "rank_pattern and alpha_pattern", "Scaling").
//
// Patterns are Python `re` syntax, compiled by python_regex.h into linear-time matchers once per parsed
// config (LoraConfig::patterns), never per module.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapter/lora_config.h"
#include "text/python_regex.h"
#include "core/result.h"

namespace pb::adapter {

// Every regex a config holds, wrapped as PEFT wraps it, compiled.
struct ConfigPatterns {
  std::optional<text::PythonRegex> target_modules;   // a regex string other than "all-linear" (re.fullmatch)
  std::optional<text::PythonRegex> exclude_modules;  // a non-empty regex string (re.fullmatch)
  // modules_to_save: an entry of letters, digits, `_` and `-` only matches exactly a dot-separated segment,
  // so those are looked up by segment (sorted, unique); the others stay regexes (each once), run as
  // re.match("(^|.*\.)" + m + "($|\..*)"). 16,000 entries then cost one pass over a name, not 16,000.
  std::vector<std::string> saved_module_names;
  std::vector<text::PythonRegex> modules_to_save;
  std::vector<text::PythonRegex> layers;     // with layers_to_transform: the layer-index patterns
  std::vector<text::PythonRegex> rank_keys;  // re.match("(.*\.)?(" + key + ")$") per key, file order
  std::vector<text::PythonRegex> alpha_keys;
};

// Compiles every regex a config holds (target_modules / exclude_modules strings, rank_pattern and
// alpha_pattern keys, modules_to_save entries and layers_pattern, wrapped as PEFT wraps them) into
// config.patterns. ParseLoraConfig calls this; code that edits those fields afterwards must call it again.
// InvalidConfig naming the field, the entry (at most 200 bytes of it) and the construct.
Status CompileConfigPatterns(LoraConfig& config);

// check_target_module_exists for a module name of the user's model (no "base_model.model." prefix):
// exclude_modules, then modules_to_save, then target_modules (list: exact or "." + suffix; regex:
// fullmatch), then layers_to_transform / layers_pattern (list form only, PEFT >= 0.20's lazy index rule).
// A null target_modules or "all-linear" cannot be decided from names alone: returns std::nullopt (so does
// a config built by hand whose patterns do not compile).
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
