// Naming schemes as data: per-architecture JSON tables (data/naming/arch/*.json) that map a model's HF
// module paths <-> an architecture-independent canonical path (layers/4/attention/query) <-> llama.cpp GGUF
// tensor names (blk.4.attn_q). The tables are embedded in the library at build time; a new architecture
// is a new JSON file (docs/naming-tables.md describes the schema). Callers may add tables at run time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "adapter/gguf_row_order.h"
#include "core/result.h"

namespace pb::adapter {

// One embedded data file (data/naming/**.json), path relative to data/naming.
struct EmbeddedFile {
  std::string_view path;
  std::string_view text;
};
std::span<const EmbeddedFile> EmbeddedNamingFiles();

// How a module's weight is laid out in the base model. Merge and translation decide orientation from this,
// not from the adapter's fan_in_fan_out flag.
enum class ModuleKind {
  kLinear,     // nn.Linear: weight [out, in]
  kConv1D,     // transformers Conv1D (GPT-2): weight [in, out], so LoRA's delta is transposed
  kEmbedding,  // nn.Embedding: weight [num_embeddings, dim]
  kConv2d,     // nn.Conv2d: weight [out, in, kh, kw]
  kOther,      // norms, biases and anything LoRA does not target
};
std::string_view ModuleKindName(ModuleKind kind);

struct ModuleTemplate {
  std::string hf;     // relative to one of the table's body prefixes, {N} = layer index: "layers.{N}.self_attn.q_proj"
  bool head = false;  // true: `hf` is a full path outside the body (lm_head, score, classifier.dense)
  std::string canonical;            // "layers/{N}/attention/query"
  std::optional<std::string> gguf;  // "blk.{N}.attn_q" (no ".weight"); absent: llama.cpp has no such tensor
  ModuleKind kind = ModuleKind::kLinear;
  std::optional<RowPermutation> gguf_permute;
  // The hf path of the module whose weight this one shares when the architecture's default config ties them
  // (lm_head -> embed_tokens): a checkpoint then stores only that module's tensor.
  std::optional<std::string> tied_to;
  // For a fused projection, the roles stacked in its output rows, in order ("query", "key", "value").
  std::vector<std::string> fused;
};

// The most module templates and body prefixes one table may list (the largest built-in table has 30 and 2):
// every lookup tries each template under each prefix, so these bound its cost (docs/limits.md).
inline constexpr size_t kMaxTemplates = 1000;
inline constexpr size_t kMaxBodyPrefixes = 16;

struct ArchTable {
  std::string name;                        // file stem, e.g. "llama"
  std::vector<std::string> model_types;    // config.json model_type values: "llama", "mistral", "qwen2"...
  std::vector<std::string> architectures;  // config.json architectures values: "LlamaForCausalLM"...
  std::string gguf_arch;                   // llama.cpp's general.architecture; empty when llama.cpp has none
  std::vector<std::string> body_prefixes;  // tried in order, e.g. ["model.", ""] or ["transformer.", ""]
  std::vector<ModuleTemplate> modules;
  int detect_priority = 0;  // Detect's tie-break between tables with the same module names (llama over qwen2)
};

// A module path resolved against a table.
struct ModuleMatch {
  const ArchTable* arch = nullptr;
  const ModuleTemplate* tmpl = nullptr;
  std::string prefix;             // the body prefix that matched ("" for head templates)
  std::optional<uint64_t> layer;  // the {N} value
  std::string hf;                 // the full HF module path
  std::string canonical;          // with {N} filled in
  std::optional<std::string> gguf;
};

class NamingTables {
 public:
  // The tables shipped with the library (parsed once, on first use).
  static const NamingTables& Builtin();
  // Parses tables from JSON texts ({path, text}); InvalidConfig naming the file and field on a bad table.
  static Result<NamingTables> Parse(std::span<const EmbeddedFile> files);
  // Adds tables (e.g. user-supplied ones) after these; a later table with the same name replaces the earlier.
  Status Add(std::span<const EmbeddedFile> files);

  const std::vector<ArchTable>& arches() const { return arches_; }
  // By table name, model_type or architectures entry (exact); nullptr if none.
  const ArchTable* Find(std::string_view name) const;
  // From a base model's config.json text: `architectures` entries first, then `model_type`.
  const ArchTable* FromModelConfig(std::string_view config_json) const;
  // The table whose templates match the most of `module_paths` (HF module paths), at least one; nullptr if
  // none matches any. Ties go to the higher detect_priority, then to the table listed first. Tables that
  // share module names (llama, qwen2, gemma, phi...) tie: only a config.json tells them apart.
  const ArchTable* Detect(std::span<const std::string> module_paths) const;

  std::optional<ModuleMatch> MatchHf(const ArchTable& arch, std::string_view hf_module_path) const;
  // The HF path for a canonical / GGUF name, under `prefix` (a body prefix of the table).
  std::optional<ModuleMatch> FromCanonical(const ArchTable& arch, std::string_view canonical,
                                           std::string_view prefix) const;
  std::optional<ModuleMatch> FromGguf(const ArchTable& arch, std::string_view gguf_name, std::string_view prefix) const;
  // kohya-style paths lose their dots ("model_layers_0_self_attn_q_proj"); the templates disambiguate.
  // Returns the match only when exactly one template (under any body prefix) fits.
  std::optional<ModuleMatch> FromUnderscored(const ArchTable& arch, std::string_view underscored) const;

 private:
  std::vector<ArchTable> arches_;
};

}  // namespace pb::adapter
