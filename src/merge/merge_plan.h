// Planning a streaming LoRA merge: which base tensor each adapter module lands on, in which orientation,
// what happens to every other tensor, and the output headers - all decided from the headers alone, before
// any byte is written. Every base/adapter mismatch is found here and reported together.
//
// Orientation comes from the base: a weight stored [in, out] (transformers Conv1D, as the architecture
// table says, or as the shapes prove) gets the transposed delta, whatever the adapter's fan_in_fan_out says.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter.h"
#include "adapter/key_mapping.h"
#include "adapter/naming_tables.h"
#include "core/writer.h"

namespace pb::merge {

enum class TensorOp {
  kCopy,              // passed through unchanged (same dtype)
  kConvert,           // passed through, converted to the output dtype
  kLowRank,           // W' = round(W + s * left @ right): Linear [out, in], Conv1D [in, out], Conv [out, in*k...]
  kLowRankEmbedding,  // the same with PEFT's embedding rule (delta rounded to W's dtype first)
  kLowRankExperts,  // a fused experts parameter [E, P, Q] as [E·P, Q]: per expert e, rows e·P.. get round_W(s·ΔW_e)
                    // added (PEFT's ParamWrapper rounds the delta to W's dtype first, adapter/param_wrapper.h)
  kDoraRows,        // DoRA with one norm per row of the stored weight (Linear, Conv)
  kDoraColumns,     // DoRA with one norm per column of the stored weight (Conv1D, Embedding): held whole
  kAddBias,         // b' = b + s * lora_B.bias
  kReplace,         // the adapter's copy replaces the base tensor (modules_to_save, saved embeddings)
  kAdd,             // a tensor the base does not have, taken from the adapter (e.g. a classification head)
  kReplaceRows,     // trainable tokens: the listed rows replaced by the adapter's (rounded to W's dtype), the rest kept
};
std::string_view TensorOpName(TensorOp op);

// How left/right are built from the module's A and B for kLowRank*/kDora*.
enum class Orientation {
  kOutIn,  // stored [out, in(, k...)]: left = B [out, r], right = A [r, in*k]
  kInOut,  // stored [in, out] (Conv1D) or [num, dim] (Embedding): left = A^T, right = B^T
  // kLowRankExperts: the same per expert e, with A_e = A's rows e·r + k and B_e = B's columns k·E + e (kOutIn:
  // stored [E, out, in]; kInOut: [E, in, out], transformers' is_transposed experts).
};

// `--quantize`: the merged model written quantized (merge/quantize_plan.h says which tensors, in which layout).
enum class QuantMethod { kFp8, kInt8, kInt4 };
enum class QuantScheme {
  kChannel,  // one scale per output row (compressed-tensors strategy "channel")
  kGroup,    // one scale per `group_size` input columns of a row (strategy "group")
  kBlock,    // FP8 only: transformers' FineGrainedFP8, 128 x 128 blocks, fp32 weight_scale_inv
};
struct QuantizeOptions {
  QuantMethod method = QuantMethod::kFp8;
  QuantScheme scheme = QuantScheme::kChannel;
  uint64_t group_size = 128;  // kGroup's columns per scale; kBlock's block edge is 128
};

// What one quantized weight becomes in the output: the quantized values and their scales (and, for
// pack-quantized, the original shape), in this order, under the names the loaders look for.
struct QuantizedOutput {
  std::string weight;  // `<m>.weight` (FP8) or `<m>.weight_packed` (INT, int32)
  Dtype weight_dtype = Dtype::F8_E4M3;
  std::vector<uint64_t> weight_shape;
  std::string scale;               // `<m>.weight_scale`, or `<m>.weight_scale_inv` (fine-grained FP8)
  Dtype scale_dtype = Dtype::F32;  // the model dtype (compressed-tensors), F32 (fine-grained)
  std::vector<uint64_t> scale_shape;
  std::string shape;  // `<m>.weight_shape` (pack-quantized, int64 [2]); empty otherwise
};

struct PlannedTensor {
  std::optional<size_t> source;  // tensor index in the shard's header; absent for kAdd
  std::string name;              // output name (= input name)
  Dtype in_dtype = Dtype::F32;
  Dtype out_dtype = Dtype::F32;
  std::vector<uint64_t> shape;
  TensorOp op = TensorOp::kCopy;
  const adapter::LoraModule* module = nullptr;  // kLowRank*, kDora*, kAddBias
  // kReplace, kAdd: the adapter's tensor. With a merge op: the saved full weight the merge starts from
  // (PEFT's save_embedding_layers), instead of the base's bytes. kReplaceRows: the trainable-tokens tensor
  // (its token_indices say which rows).
  const adapter::ExtraTensor* replacement = nullptr;
  Orientation orientation = Orientation::kOutIn;
  uint64_t rows = 0, cols = 0;  // the stored weight viewed as a matrix
  // kLowRankExperts: E, the rows of one expert's matrix (out, or in when transposed), and which row of the
  // parameter viewed as [E·expert_rows, cols] this tensor's first row is (0 when stored whole; e·out + offset
  // for one expert's tensor, merge/experts_layout.h).
  uint64_t experts = 0, expert_rows = 0, first_row = 0;
  // --quantize: this weight (viewed as rows x cols) is written quantized, merged in fp32, rounded to out_dtype
  // (the model as the quantizing library would observe it), then quantized.
  std::optional<QuantizedOutput> quantized;
};

struct ShardPlan {
  std::string name;                    // file name of the input shard (and of the output)
  std::vector<PlannedTensor> tensors;  // in input data order; kAdd tensors last
  WritePlan write;                     // output header; tensors in the same order
};

struct MergeOptions {
  std::optional<Dtype> dtype;  // output dtype of every floating-point tensor; default: keep each one's
  bool safe = false;           // fail on NaN/Inf in a merged tensor, naming the module
  bool unmerge = false;        // subtract instead of add
  std::optional<std::string> arch;
  const adapter::NamingTables* tables = nullptr;
  // transformers' checkpoint key mapping (adapter/key_mapping.h), selected by the base's config.json; the builtin one
  // when null.
  const adapter::KeyMapping* key_mapping = nullptr;
  std::optional<QuantizeOptions> quantize;
  // Merge anyway when the adapter has tensors the merge cannot apply (--allow-partial); otherwise PlanMerge refuses
  // them (adapter::CheckDropped: UnresolvedTensor listing every one).
  bool allow_partial = false;
  // The most bytes of a module's left factor fetched at once. For a weight stored [out, in], B [out, r]
  // is the left factor and a block of its rows is contiguous in the file: when B is larger than this, the merge
  // fetches it one block of rows at a time, as the weight's rows arrive, next to the whole A, so a 1 GB adapter's
  // r = 2048 module holds A and a few MiB of B instead of both. The output does not change (each weight row's
  // arithmetic is the same). 0: every factor whole.
  uint64_t factor_block_bytes = 4 << 20;
};

// The quantization a plan applies: which weights, which 2-D weights it keeps (and why), and the module names the
// config's `ignore` (compressed-tensors) or `modules_to_not_convert` (fine-grained FP8) lists.
struct QuantizePlan {
  QuantizeOptions options;
  std::vector<std::string> quantized;                     // tensor names, in output order
  std::vector<std::pair<std::string, std::string>> kept;  // tensor name, reason
  std::vector<size_t> unexpected;                         // indices into `kept` of what the libraries would
                                                          // quantize (dims the layout cannot divide, dtypes)
  std::vector<uint64_t> linear_cols;                      // in_features of every Linear weight considered
  std::vector<std::string> ignore;
  // One line per class of weights (layer numbers as `*`) and reason that stays unquantized although the
  // libraries' defaults would quantize it: the CLIs print each as a `warning:` line, the summaries list them.
  std::vector<std::string> warnings;
};

struct MergePlan {
  std::vector<ShardPlan> shards;
  size_t modules_matched = 0;
  size_t tensors_merged = 0;  // base tensors whose values change
  std::vector<std::string> notes;
  std::optional<std::string> arch;         // naming table used
  std::optional<std::string> config_json;  // the output config.json (edited copy), when a base config was given
  uint64_t total_tensor_bytes = 0;         // sum over every output tensor (the index's total_size)
  uint64_t total_file_bytes = 0;           // sum of the output files' sizes
  std::optional<QuantizePlan> quantize;    // with --quantize
  // With allow_partial: the `warning:` lines for the adapter tensors the merge does not apply (adapter::CheckDropped,
  // which refuses them otherwise); RenderMergeWarnings prints them.
  std::string dropped_warnings;
};

struct BaseShardHeader {
  std::string name;
  const Header* header;
};

// Errors: every problem in one Error (merge/plan_problems.h), each also in Error::problems with its own code.
// ModulesNotFound when the base lacks any adapter module (the headline names both models and counts the modules
// found); else ShapeMismatch when any is a mismatch (shapes that disagree); UnsupportedAdapter when all are
// refusals (conv groups > 1, DoRA unmerge, a tied head that would have to be written twice...).
Result<MergePlan> PlanMerge(const std::vector<BaseShardHeader>& shards, const adapter::Adapter& adapter,
                            const std::optional<std::string>& base_config, const MergeOptions& options);

}  // namespace pb::merge
