// transformers' checkpoint key mapping, as data (data/naming/transformers/key-mapping.json, written from the pinned
// transformers by scripts/transformers-key-mapping.py).
//
// transformers 5 loads some checkpoints under other names than they are saved with: ViT's checkpoint holds
// `vit.encoder.layer.0.attention.attention.query.weight`, the loaded module is `vit.layers.0.attention.q_proj`, and
// `save_pretrained` writes the checkpoint's names back. PEFT names an adapter's modules by the loaded names, so a
// merge maps each checkpoint name to its loaded name the way transformers' loader does (core_model_loading's
// rename_source_key: every rename in order, then at most one converter), and writes the checkpoint's names.
//
// Renames are plain regex substitutions, matched with the Python `re` engine (text/python_regex.h). Converters
// (fusing, splitting, transposing, permuting tensors) and the renames transformers implements in code are not
// applied: MapCheckpointKey says which loaded names a converter builds, so that a module built by one is refused
// by name instead of merged into the wrong layout.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/python_regex.h"
#include "core/result.h"

namespace pb::adapter {

struct KeyRule {
  enum class Kind { kRename, kConvert, kUnsupported };
  Kind kind = Kind::kRename;
  // re.search of the branches, in transformers' order: "[\s\S]*?(?:(b0)|(b1)...)"; branch_group[i] is branch i's
  // group in it (Python's group(0) of the match is that group's text).
  text::PythonRegex search;
  std::vector<int> branch_group;
  std::vector<std::string> branch_patterns;  // as the data lists them (messages)
  // Python's fixed-width negative lookbehinds that start a branch ("(?<!model\.)stages"), which the engine lacks:
  // the branch does not match at a position the `width` characters before which fully match `regex`. A rule with
  // any is searched position by position, each branch (`branches`) matched on the text from there (Python's
  // search order: the leftmost position, then the first branch).
  struct NotAfter {
    text::PythonRegex regex;
    size_t width = 0;
  };
  std::vector<std::vector<NotAfter>> not_after;  // per branch
  std::vector<text::PythonRegex> branches;       // per branch, only when some branch has a lookbehind
  std::vector<std::string> targets;              // the replacement of a rename; every name a converter builds
  // A rule of a sub-model only matches keys under its path (transformers' scope_prefix), with or without the
  // model's base_model_prefix before it.
  std::optional<std::string> scope;
  std::string base_model_prefix;
  std::string what;  // a converter's operations, or the class of a rename implemented in code
};

// The rules transformers applies to one model: its model_type's (or head class's), then the legacy ones.
struct KeyRules {
  std::string selected_by;  // "model_type vit", "architecture Qwen2_5_VLForConditionalGeneration"
  std::vector<const KeyRule*> rules;
  // The model's base_model_prefix ("model", "vit"): transformers' loader strips it from a renamed key the base model
  // has without it, as rules written for `XForY` ("^vision_model." -> "model.vision_model.") also serve `XModel`.
  std::string base_model_prefix;
};

// What the loaded model calls one checkpoint tensor.
struct LoadedKey {
  std::string name;  // after every rename (the checkpoint's name when none applies)
  // A converter, or a rename transformers implements in code, matched this key: the rule, and the loaded names
  // it builds from it (a converter's targets; empty for a rename in code, whose result is not computed).
  const KeyRule* not_renamed = nullptr;
  std::vector<std::string> built;
};

LoadedKey MapCheckpointKey(const KeyRules& rules, std::string_view key);

class KeyMapping {
 public:
  // The shipped mapping (parsed once, on first use; empty if it failed to parse, which a unit test rules out).
  static const KeyMapping& Builtin();
  // InvalidConfig naming `path` and the field when the document or one of its patterns is malformed.
  static Result<KeyMapping> Parse(std::string_view json, std::string_view path);

  const std::string& transformers_version() const { return version_; }
  std::vector<std::string> model_types() const;
  std::vector<std::string> architectures() const;
  // The rules for a base's config.json: its first `architectures` entry when the data has rules for that class,
  // else its `model_type`'s, else the legacy renames transformers applies to every model; nullopt without a
  // readable config.
  std::optional<KeyRules> ForConfig(std::string_view config_json) const;
  std::optional<KeyRules> ForModelType(std::string_view model_type) const;
  std::optional<KeyRules> ForArchitecture(std::string_view architecture) const;

 private:
  struct Named {
    std::string name;
    std::vector<KeyRule> rules;
    std::string model_type;  // an architecture's (its base_model_prefix is the model_type's)
  };
  std::vector<std::pair<std::string, std::string>> base_model_prefixes_;  // model_type -> prefix
  std::optional<KeyRules> Select(const Named* entry, std::string selected_by) const;
  std::string version_;
  std::vector<KeyRule> legacy_;
  std::vector<Named> model_types_, architectures_;
};

}  // namespace pb::adapter
