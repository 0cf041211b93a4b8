// A LoRA adapter in peft-bridge's canonical form: PEFT's meaning, independent of the file convention it
// was read from. Every format reader produces an Adapter and every writer consumes one, so a translation
// is read(from) -> Adapter -> write(to), and the merge (docs/merge.md) only ever sees this form.
//
// A tensor is either held (its bytes here) or a reference into the adapter's weights file (tensor_ref.h):
// readers given only the header produce references, and consumers fetch each tensor's bytes by range when
// they use it, so the size of an adapter file does not bound what can be read, merged or translated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapter/lora_config.h"
#include "adapter/module_select.h"
#include "adapter/param_wrapper.h"
#include "adapter/tensor_ref.h"
#include "core/dtype.h"
#include "core/header.h"
#include "core/result.h"

namespace pb::adapter {

// One tensor: its bytes (little-endian, row-major, as in safetensors), or where to fetch them.
struct Tensor {
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;    // empty when `ref` is set
  std::optional<TensorRef> ref;  // set when the bytes are still in the adapter file
  uint64_t element_count() const;
  uint64_t byte_length() const { return element_count() * DtypeBits(dtype) / 8; }
  bool held() const { return !ref.has_value(); }
};

// A shape as messages print it: "[4096, 16]", "[]" for a scalar.
std::string ShapeText(const std::vector<uint64_t>& shape);

// The shape family of a LoRA module, read from its factors (the base layer type is the architecture's
// business, see naming_tables.h ModuleKind).
enum class LoraShape {
  kLinear,     // A [r, in], B [out, r]  (nn.Linear, and transformers Conv1D whose delta is transposed)
  kEmbedding,  // lora_embedding_A [r, num_embeddings], lora_embedding_B [dim, r]
  kConv,       // A [r, in, *kernel], B [out, r, 1...]
  kExperts,    // PEFT's ParamWrapper on a fused 3-D experts parameter: A [r·E, in], B [out, r·E] (param_wrapper.h)
};
std::string_view LoraShapeName(LoraShape shape);

struct LoraModule {
  // Module path in the user's model, e.g. "model.layers.0.self_attn.q_proj"; for kExperts the wrapper's path as
  // PEFT's keys spell it ("model.layers.0.mlp.experts.base_layer"), `experts` saying which parameter it wraps.
  std::string path;
  LoraShape shape = LoraShape::kLinear;
  Tensor a;  // PEFT orientation always
  Tensor b;
  std::optional<Tensor> b_bias;          // lora_B.bias (lora_bias=True), [out]
  std::optional<Tensor> magnitude;       // DoRA lora_magnitude_vector
  ModuleSettings settings;               // r, alpha, scaling as PEFT resolves them for this module
  std::optional<ExpertsTarget> experts;  // kExperts: the parameter, its experts and the nesting
  uint64_t rank() const {
    if (a.shape.empty()) return 0;
    return experts && experts->num_experts ? a.shape[0] / experts->num_experts : a.shape[0];
  }
  uint64_t in_features() const;   // A's columns (num_embeddings for embeddings; in*kernel... for conv: in)
  uint64_t out_features() const;  // B's rows (embedding_dim for embeddings)
};

// Tensors that are not LoRA factors but belong to the adapter.
enum class ExtraKind {
  kModulesToSave,    // a full copy of a module listed in (or implied by) modules_to_save: replaces the base
  kSavedEmbedding,   // save_embedding_layers: a full embedding / lm_head weight
  kBias,             // bias="all" / "lora_only": a trained bias of the base model
  kTrainableTokens,  // token_adapter.trainable_tokens_delta: new values of selected embedding rows
};
std::string_view ExtraKindName(ExtraKind kind);

struct ExtraTensor {
  std::string key;  // the PEFT key without "base_model.model.", e.g. "score.weight"
  ExtraKind kind;
  Tensor tensor;
  // kTrainableTokens: the embedding rows the tensor's rows replace, in its row order (the config's
  // trainable_token_indices for this module).
  std::vector<uint64_t> token_indices;
};
// kTrainableTokens: the module whose weight rows are replaced ("model.embed_tokens"), from the key.
std::string TrainableTokensModule(const ExtraTensor& e);
// What the tensor is, for messages: "a full modules_to_save tensor", "a trainable_tokens tensor (3 replaced
// rows of `model.embed_tokens`)".
std::string DescribeExtra(const ExtraTensor& e);

// A tensor of the input that was not taken into the adapter, and why.
struct RejectedTensor {
  std::string name;
  std::string reason;
};

// No silent loss, the one rule for every operation that writes less than its input holds (translate, merge,
// unmerge, combine; both CLIs and the JS API): with any dropped tensor and no --allow-partial (allowPartial), an
// UnresolvedTensor error naming `command` and listing every one; otherwise the stderr text, one "warning: " line
// per dropped tensor (empty when none).
Result<std::string> CheckDropped(std::string_view command, const std::vector<RejectedTensor>& dropped,
                                 bool allow_partial);

// How one input tensor was accounted for: mapped to an output name (possibly transformed) or rejected.
struct TensorMapping {
  std::string from;
  std::string to;      // empty when rejected
  std::string action;  // "copy", "transpose", "fold scale", "permute rows", ... or "rejected"
  std::string reason;  // why it was rejected (empty otherwise)
};

struct Adapter {
  LoraConfig config;                // PEFT's config (synthesized when the source was not PEFT)
  std::vector<LoraModule> modules;  // in order of first appearance in the source
  std::vector<ExtraTensor> extras;
  std::vector<RejectedTensor> rejected;  // input tensors not understood
  std::vector<std::string> notes;        // facts worth telling (e.g. tensors PEFT would silently ignore)
  std::string source_format;             // "peft", "mlx", "kohya", "gguf-names"
  std::optional<std::string> arch;       // naming table used or detected, if any

  uint64_t parameter_count() const;  // elements of every tensor held
  const LoraModule* FindModule(std::string_view path) const;
};

// Splits a PEFT key (after "base_model.model.") into module path and role. Public for tests and the
// other formats, which reuse PEFT's role vocabulary.
enum class PeftRole { kLoraA, kLoraB, kLoraBBias, kEmbeddingA, kEmbeddingB, kMagnitude, kTrainableTokens };
struct PeftKey {
  std::string module;
  PeftRole role;
};
std::optional<PeftKey> ParsePeftLoraKey(std::string_view key_without_prefix);
std::string PeftKeyFor(std::string_view module, PeftRole role);  // without the prefix
std::string_view PeftRoleSuffix(PeftRole role);                  // ".lora_A.weight", ".lora_embedding_A", ...

// Reads tensor bytes out of a whole safetensors file already validated by ParseWholeFile.
Tensor TensorFromFile(const Header& header, std::span<const uint8_t> file, size_t index);
// A reference to tensor `index` of a file whose header is `header` (no bytes).
Tensor TensorRefFromHeader(const Header& header, size_t index);

// Assembles modules from per-role tensors and checks their shapes against each other and the config:
// A/B ranks agree and equal the resolved r, B/bias/magnitude sizes agree with out_features, embedding and
// conv factors have their shapes. ShapeMismatch (naming the module and both shapes) otherwise.
struct RoleTensor {
  std::string module;
  PeftRole role;
  Tensor tensor;
};
Result<std::vector<LoraModule>> AssembleModules(std::vector<RoleTensor> tensors, const LoraConfig& config);

}  // namespace pb::adapter
