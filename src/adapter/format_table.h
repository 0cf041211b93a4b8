// Adapter file conventions as data (data/naming/formats/*.json): which file names, which key prefixes,
// how a module path is spelled (dotted, underscored, GGUF names), and which key suffix holds which LoRA role
// in which orientation. The format readers and writers interpret these tables; the few things that are not
// naming (each tool's config file, where the scaling lives) are handled per format in code.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/header.h"
#include "core/result.h"

namespace pb::adapter {

// The five conventions translate writes, plus read-only diffusers' attention-processor files. kGguf is
// llama.cpp's own container (a .gguf file, src/gguf); kGgufNames the same names and layout in a safetensors file.
enum class AdapterFormat { kPeft, kMlx, kKohya, kGgufNames, kDiffusersAttnProc, kGguf };
inline constexpr size_t kAdapterFormatCount = 6;
// "peft", "mlx", "kohya", "gguf-names", "diffusers-attnproc", "gguf"
std::string_view FormatName(AdapterFormat format);
std::optional<AdapterFormat> ParseFormatName(std::string_view name);

// Roles a format can store; PEFT's factors plus kohya's per-module alpha.
enum class FormatRole { kLoraA, kLoraB, kLoraBBias, kEmbeddingA, kEmbeddingB, kMagnitude, kAlpha };

struct RoleSpelling {
  FormatRole role;
  std::string suffix;      // appended to the module's spelled path
  bool transpose = false;  // stored as the transpose of PEFT's orientation (2-D only)
};

enum class PathStyle {
  kDotted,      // the HF module path as is
  kUnderscore,  // every "." replaced by "_" (kohya); reading needs a naming table to put the dots back
  kGguf,        // llama.cpp tensor names from the architecture's naming table
};

struct FormatTable {
  AdapterFormat format;
  std::string weights_file;
  std::optional<std::string> config_file;
  std::vector<std::string> prefixes;  // accepted when reading, first one written (unless write_prefix)
  std::optional<std::string> write_prefix;
  PathStyle path_style = PathStyle::kDotted;
  std::optional<Metadata> metadata;  // written as __metadata__ (null: no __metadata__)
  // Applied in order to a spelled path when reading (first occurrence of `from` becomes `to`), for
  // conventions that name modules differently from the model ("x.processor.to_out" -> "x.to_out.0").
  std::vector<std::pair<std::string, std::string>> path_rewrites;
  std::vector<RoleSpelling> roles;  // longest suffix first, so ".weight.lora_a" is tried before shorter ones
  const RoleSpelling* Find(FormatRole role) const;
};

// The built-in table for a format (parsed from the embedded data on first use).
const FormatTable& BuiltinFormatTable(AdapterFormat format);
// Parses one table; InvalidConfig naming the field on error.
Result<FormatTable> ParseFormatTable(std::string_view path, std::string_view json_text);

// A key split by a table: prefix removed, role recognised; `spelled_path` still in the table's path style.
struct FormatKey {
  std::string prefix;
  std::string spelled_path;
  const RoleSpelling* spelling;
};
// Embedding and linear roles can share a suffix (mlx's lora_a); the first spelling in table order wins and
// the reader decides embedding vs linear from the module.
std::optional<FormatKey> SplitFormatKey(const FormatTable& table, std::string_view key);
// The module path a spelled path stands for, after the table's path_rewrites.
std::string RewritePath(const FormatTable& table, std::string path);

}  // namespace pb::adapter
