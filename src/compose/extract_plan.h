// `extract`: a LoRA adapter from a full fine-tune, as mergekit-extract-lora makes it (per module the truncated
// SVD of W_tuned − W_base, √S split into A and B), planned from the safetensors headers of both models alone
// (sans-I/O: the edge reads them, then the tensors extract_job.h asks for).
//
//  - Decomposed (lora_A / lora_B): the modules --modules picks (PEFT's list rule, or all-linear: every
//    nn.Linear / Conv1D but the output head), 2-D weights, and 4-D convolutions named in the list; with
//    --embeddings lora also the input embeddings (lora_embedding_A/B) and the output head (a Linear).
//  - Saved whole (modules_to_save), when any of their tensors changed: modules whose tensors are all 1-D
//    (norms), and with --embeddings save (the default, mergekit's) the embeddings and the head.
//  - A decomposed module's bias that changed becomes lora_B.bias (lora_bias: true; PEFT adds it to the bias
//    times the scaling, which is 1 here).
//  - Left out, and said so: modules with 2-D or larger weights that are not decomposed (they are not read).
//  - The config sets r = lora_alpha = the largest rank and rank_pattern = alpha_pattern for the others, so every
//    module's scaling is exactly 1, as mergekit's; modules that did not change are dropped.
//
// The output's header depends on what the data turns out to be (ranks with --energy, which modules changed), so
// adapter_model.safetensors is laid out with a header region reserved up front (`reserved_header` bytes: the
// header of every candidate tensor at its largest shape, an upper bound), the data written after it as it is
// made, and the real header, padded with spaces to exactly that size (safetensors allows trailing spaces), last.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapter/naming_tables.h"
#include "core/dtype.h"
#include "core/header.h"
#include "core/result.h"

namespace pb::compose {

class ModelModules;

enum class EmbeddingPolicy { kSave, kLora, kSkip };

// The options as text, exactly as both CLIs receive them (the JS API passes strings too).
struct ExtractArguments {
  std::optional<std::string> rank, energy, max_rank, modules, embeddings, dtype;
};

struct ExtractOptions {
  std::optional<uint64_t> rank;  // --rank: every module at this rank (or its smaller side)
  std::optional<double> energy;  // --energy: the smallest rank keeping this fraction of ‖ΔW‖²
  uint64_t max_rank = 128;       // mergekit's default; the rank when neither is given
  std::vector<std::string> module_names;
  bool all_linear = true;
  EmbeddingPolicy embeddings = EmbeddingPolicy::kSave;
  std::optional<Dtype> dtype;  // default: the tuned model's weight dtype
  std::optional<std::string> base_name_or_path, revision, arch;
  const adapter::NamingTables* tables = nullptr;  // the builtin ones when null
};

// InvalidArgument with the message both CLIs print as a usage error.
Result<ExtractOptions> ParseExtractArguments(const ExtractArguments& args);

struct ExtractShard {
  std::string name;
  const Header* header;
};

// One tensor of one of the models: its shard, name, dtype, shape and absolute byte range in the shard file.
struct ModelTensor {
  size_t shard = 0;
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;
  uint64_t elements() const;
};

enum class ExtractKind {
  kLora,           // lora_A.weight / lora_B.weight (+ lora_B.bias): Linear, Conv1D, convolutions, the head
  kEmbeddingLora,  // lora_embedding_A / lora_embedding_B
  kSave,           // modules_to_save: the tuned tensors, whole
};

struct ExtractModule {
  std::string path;
  ExtractKind kind = ExtractKind::kLora;
  adapter::ModuleKind layer = adapter::ModuleKind::kLinear;
  // The stored weight is [rows, cols] (a convolution's trailing dims folded into cols); `transposed` when the
  // delta PEFT forms is its transpose (Conv1D [in, out], embeddings [vocab, dim]).
  uint64_t rows = 0, cols = 0;
  bool transposed = false;
  std::vector<uint64_t> kernel;  // a convolution's kernel dims (A is [r, in, kernel...], B [out, r, 1...])
  uint64_t max_rank = 0;         // the rank it gets (--rank) or may get (--energy), ≤ min(rows, cols)
  // kLora / kEmbeddingLora: the weight of each model, and the bias when there is one.
  std::optional<ModelTensor> base_weight, tuned_weight, base_bias, tuned_bias;
  // kSave: the module's own tensors (name without the module path), in name order, of both models.
  std::vector<std::string> saved_names;
  std::vector<ModelTensor> base_saved, tuned_saved;
  std::string save_as;  // its modules_to_save entry: the path, or the task head (score, classifier) it is part of
  uint64_t in_features() const { return transposed ? rows : cols; }
  uint64_t out_features() const { return transposed ? cols : rows; }
  std::string key() const { return "base_model.model." + path; }
};

struct ExtractPlan {
  ExtractOptions options;
  std::string arch;                             // the naming table used; empty when none
  Dtype dtype = Dtype::BF16;                    // the adapter's tensors
  std::vector<ExtractModule> modules;           // in output order (their tensors' names in byte order)
  std::vector<std::string> left_out;            // modules with ≥ 2-D weights neither decomposed nor saved
  std::vector<std::string> skipped_embeddings;  // --embeddings skip: not read
  uint64_t reserved_header = 0;                 // bytes before the data region (length prefix included)
  uint64_t read_bytes = 0;                      // bytes of both models the plan reads at least once
  uint64_t largest_delta_elements = 0;          // the largest decomposed module (its float32 delta is held)
  std::optional<std::string> task_type;         // from the tuned config's architectures
  bool conv1d = false;                          // fan_in_fan_out for the config
  std::vector<std::string> notes;
  std::shared_ptr<const ModelModules> model_modules;  // the base's modules (target_modules as PEFT saves them)
};

inline constexpr std::string_view kExtractWeightsName = "adapter_model.safetensors";
inline constexpr std::string_view kExtractConfigName = "adapter_config.json";

// Errors: InvalidArgument (a module name matching nothing, nothing to extract), ShapeMismatch (the models'
// tensors differ in names, shapes or kinds: every difference listed), UnsupportedAdapter (a targeted module
// whose weight is not a float or not a layer LoRA can represent).
Result<ExtractPlan> PlanExtract(const std::vector<ExtractShard>& base, const std::vector<ExtractShard>& tuned,
                                const std::optional<std::string>& base_config,
                                const std::optional<std::string>& tuned_config, ExtractOptions options);

}  // namespace pb::compose
