// `create`: a fresh LoRA adapter for a base model, as PEFT's get_peft_model(model, LoraConfig(...)) makes it
// before any training step, planned from the base's safetensors headers alone (sans-I/O: the edge reads them).
//
//  - Modules: every module path of the base (its tensors' names without the last component, and every dotted
//    prefix of those: containers), matched as PEFT matches target_modules: a list entry equals the name or is
//    a dotted suffix of it; a regex must match the whole name (re.fullmatch); "all-linear" is every nn.Linear /
//    Conv1D but the output embedding (the naming table's head/lm module), the module types coming from the
//    naming table of the base (config.json, --arch, else detected from the paths).
//  - Shapes from the weights: nn.Linear [out, in], Conv1D (naming table kind) [in, out]. lora_A [r, in],
//    lora_B [out, r], DoRA's lora_magnitude_vector [out].
//  - The config: PEFT's own for those settings (DefaultLoraConfigDocument plus what LoraConfig and
//    get_peft_model set: r, lora_alpha, target_modules (PEFT's condensed suffixes for 20 names or more),
//    use_rslora, use_dora, init_lora_weights, fan_in_fan_out for Conv1D, auto_mapping, base_model_name_or_path).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "adapter/naming_tables.h"
#include "core/dtype.h"
#include "core/header.h"
#include "core/result.h"
#include "core/writer.h"

namespace pb::compose {

enum class CreateInit { kKaiming, kGaussian };

// The options as text, exactly as both CLIs receive them (the JS API passes its values as strings too), so
// that every check and message is this file's.
struct CreateArguments {
  std::optional<std::string> target_modules;  // "q_proj,v_proj" or "all-linear"
  std::optional<std::string> target_regex;    // a Python regex (re.fullmatch), PEFT's string form
  std::optional<std::string> r, alpha, seed;
  bool rslora = false, dora = false;
  std::optional<std::string> init;   // "kaiming" | "gaussian"
  std::optional<std::string> dtype;  // any spelling of core/dtype.h's ParseFloatDtypeName
};

struct CreateOptions {
  std::vector<std::string> target_names;  // the list form (in the order given, duplicates removed)
  bool all_linear = false;
  std::optional<std::string> target_regex;
  int64_t r = 8;
  double alpha = 8;          // LoraConfig's default lora_alpha
  bool alpha_is_int = true;  // 16 stays an int in the config, 16.5 or 16.0 a float, as Python keeps them
  bool rslora = false;
  bool dora = false;
  CreateInit init = CreateInit::kKaiming;
  uint64_t seed = 0;
  Dtype dtype = Dtype::F32;  // PEFT's fresh adapter is fp32 (autocast_adapter_dtype)
  // What the config names as the base (PEFT: the model's name_or_path) and its revision, when known.
  std::optional<std::string> base_name_or_path;
  std::optional<std::string> revision;
  std::optional<std::string> arch;
  const adapter::NamingTables* tables = nullptr;  // the builtin ones when null
};

// The arguments checked and parsed: InvalidArgument with the message both CLIs print as a usage error.
Result<CreateOptions> ParseCreateArguments(const CreateArguments& args);

struct CreateShard {
  std::string name;
  const Header* header;
};

struct CreateModule {
  std::string path;          // the HF module path, e.g. model.layers.0.self_attn.q_proj
  adapter::ModuleKind kind;  // kLinear or kConv1D
  uint64_t in_features, out_features;
  double scaling;  // alpha / r, or alpha / sqrt(r)
  // The base weight (DoRA reads it for the magnitude): its shard, name, dtype and absolute byte range.
  size_t shard;
  std::string weight;
  Dtype weight_dtype;
  uint64_t begin, end;
};

enum class CreateTensorRole { kA, kB, kMagnitude };

struct CreateTensor {
  size_t module;
  CreateTensorRole role;
};

struct CreatePlan {
  CreateOptions options;
  std::string arch;                         // the naming table used; empty when none
  std::vector<CreateModule> modules;        // natural path order
  std::vector<TensorSpec> specs;            // the output tensors, in module order (A, B[, magnitude])
  std::vector<CreateTensor> tensors;        // what each spec is
  WritePlan write;                          // adapter_model.safetensors: header, and the specs in file order
  std::string config_text;                  // adapter_config.json, as PEFT's save_pretrained writes it
  std::vector<std::string> target_modules;  // what the config's target_modules holds (list form), sorted
  uint64_t base_bytes = 0;                  // base weight bytes DoRA reads (0 without DoRA)
  std::vector<std::string> notes;
};

inline constexpr std::string_view kCreateWeightsName = "adapter_model.safetensors";
inline constexpr std::string_view kCreateConfigName = "adapter_config.json";

// `base_config`: the base's config.json text (naming table, auto_mapping), when there is one.
// Errors: InvalidArgument (no module matched, an entry matching nothing, a match that is no Linear/Conv1D
// layer, all-linear without module types), InvalidConfig (a regex PEFT's re would reject or we cannot run),
// UnsupportedAdapter (DoRA on a weight that is not floating point).
Result<CreatePlan> PlanCreate(const std::vector<CreateShard>& shards, const std::optional<std::string>& base_config,
                              CreateOptions options);

// A config.json (or another JSON file) named as the base: refused with the reason (the shapes are in the weights).
std::optional<Error> RefuseConfigAsBase(std::string_view base);

}  // namespace pb::compose
