// Shared plumbing of the per-format readers and writers (read_*.cc, write_*.cc). Not a public header.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "core/json.h"
#include "gguf/gguf_reader.h"

namespace pb::adapter::internal {

// Builds the canonical adapter while reading: role tensors become modules at the end; every input tensor
// ends up in `mappings`, mapped or rejected.
struct ReadState {
  const AdapterSource& source;
  const ReadOptions& options;
  const NamingTables& tables;
  Header header;
  std::map<size_t, uint64_t> inline_offsets;  // header-only source: tensor index -> offset in inline_bytes
  std::vector<RoleTensor> role_tensors;
  std::vector<std::string> role_sources;  // input key of each role tensor
  std::vector<std::string> role_actions;  // action of each role tensor
  ReadResult result;

  Tensor Load(size_t index) const;
  void Reject(std::string name, std::string reason);
  void AddRole(std::string source_key, std::string module, PeftRole role, Tensor tensor, std::string action);
  // Assembles modules with `config` (which becomes the adapter's), records mappings, applies strict.
  Result<ReadResult> Finish(LoraConfig config);
};

Result<ReadResult> ReadPeft(ReadState& state);
// llama.cpp's layout from any container: its keys as text, its tensors by index (a load that fails rejects the
// tensor with the error's message). ReadGgufNames gives a safetensors file's, read_gguf.cc a .gguf file's.
struct LlamaCppFile {
  std::string what;  // "safetensors metadata " / "GGUF key ": prefixes a key's name in messages
  std::function<std::optional<std::string>(std::string_view)> value;
  size_t tensor_count = 0;
  std::function<std::string(size_t)> name;
  std::function<Result<Tensor>(size_t)> load;
};
Result<ReadResult> ReadLlamaCppLayout(ReadState& state, const LlamaCppFile& file);
// A .gguf adapter (read_gguf.cc): its header (state.source.gguf, or parsed from the whole file's bytes).
Result<ReadResult> ReadGguf(ReadState& state, const gguf::GgufFile& file);
Result<ReadResult> ReadMlx(ReadState& state);
Result<ReadResult> ReadKohya(ReadState& state);
Result<ReadResult> ReadGgufNames(ReadState& state);
Result<ReadResult> ReadDiffusersAttnProc(ReadState& state);

Result<AdapterOutput> WritePeft(const Adapter& adapter, const WriteOptions& options);
Result<AdapterOutput> WriteMlx(const Adapter& adapter, const WriteOptions& options);
Result<AdapterOutput> WriteKohya(const Adapter& adapter, const WriteOptions& options);
Result<AdapterOutput> WriteGgufNames(const Adapter& adapter, const WriteOptions& options);
Result<AdapterOutput> WriteGguf(const Adapter& adapter, const WriteOptions& options);

// Helpers shared by several formats.
const NamingTables& TablesOf(const NamingTables* tables);
// The naming table: by name when given (InvalidArgument listing the known ones if unknown), else from the
// base config.json, else nullptr.
Result<const ArchTable*> ChooseArch(const NamingTables& tables, const std::optional<std::string>& arch,
                                    const std::optional<std::string>& base_config);
// A config document for an adapter that came from another tool: PEFT HEAD's defaults, then r, lora_alpha,
// target_modules (+ layers_to_transform), use_dora, and rank_pattern / alpha_pattern for modules that
// differ from the most common rank / alpha. `modules` hold their final rank and scaling in settings.
Json SynthesizeConfig(const std::vector<std::pair<std::string, std::pair<int64_t, double>>>& rank_alpha, bool use_dora,
                      const std::optional<std::string>& base_model);
// Parses a document we synthesized or carried (never fails for ours; errors pass through for others).
Result<LoraConfig> ConfigFromDocument(const Json& document);
// A JSON number for alpha: an integer when it is one (PEFT's lora_alpha is an int), else a float.
Json AlphaJson(double alpha);
// Layer index of a module path by PEFT >= 0.20's rule (first ".<digits>." after at least one component).
std::optional<uint64_t> LayerIndex(std::string_view module_path);
// An integer-valued config.json field, if present.
std::optional<uint64_t> ConfigInt(const std::optional<std::string>& config_json, const char* key);

// Metadata keys peft-bridge adds to formats that have no config file, so a round trip restores everything.
inline constexpr const char* kPeftConfigKey = "peft_config";                // the PEFT config document
inline constexpr const char* kModulePathsKey = "peft_bridge.module_paths";  // JSON list of dotted paths
inline constexpr const char* kArchKey = "peft_bridge.arch";                 // the naming table used
// mlx-lm's adapter_config.json: the modules whose LoRA is an embedding's (lora_embedding_A/B in PEFT). mlx-lm tells
// them apart by the model's module types, which an adapter file alone does not have; recorded so that reading back
// needs no naming table (T5's relative_attention_bias, for one, is an embedding no name rule recognises).
inline constexpr const char* kEmbeddingModulesKey = "peft_bridge.embedding_modules";

}  // namespace pb::adapter::internal
