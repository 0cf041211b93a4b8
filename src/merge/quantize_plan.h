// `--quantize`: which tensors of a merged (or converted) model are written quantized, in which layout, and the
// config.json block that tells the loaders so. Decided from names, shapes and dtypes alone (the headers).
//
// Layouts (docs/merge.md "Quantize"):
//  - fp8, per-channel: compressed-tensors `float-quantized` (llm-compressor's FP8_DYNAMIC preset: dynamic
//    per-token FP8 activations, so no calibration): `<m>.weight` F8_E4M3 [out, in], `<m>.weight_scale` [out, 1]
//    in the model dtype.
//  - int8 / int4, per-group (group 128) or per-channel: compressed-tensors `pack-quantized` (W8A16 / W4A16):
//    `<m>.weight_packed` I32 [out, ceil(in * b / 32)], `<m>.weight_scale` [out, in / g] or [out, 1] in the model
//    dtype, `<m>.weight_shape` I64 [2].
//  - fp8, block: transformers' FineGrainedFP8 (`quant_method: "fp8"`): `<m>.weight` F8_E4M3 [out, in],
//    `<m>.weight_scale_inv` F32 [out / 128, in / 128].
// What is quantized: 2-D weights of nn.Linear modules (llm-compressor's `targets=["Linear"]`) in BF16, F16 or F32.
// Embeddings, norms, biases, transformers Conv1D (GPT-2) and anything not 2-D are not Linear weights and are left
// as they are; Linear weights kept unquantized - lm_head (llm-compressor's `ignore=["lm_head"]`), MoE routers
// and experts, dims the layout cannot divide, other dtypes - are listed in the config's ignore list and in the
// plan with their reason.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "adapter/naming_tables.h"
#include "core/json.h"
#include "merge/merge_plan.h"

namespace pb::merge {

// The compressed-tensors release whose layout and config these are (the version string config.json records).
inline constexpr std::string_view kCompressedTensorsVersion = "0.20.1";
inline constexpr uint64_t kFp8BlockSize = 128;

// From the CLI's / JS API's words: method fp8|int8|int4; scheme per-channel|per-group|block (absent: fp8 ->
// per-channel, int -> per-group); group size (only with per-group; default 128). InvalidArgument on a bad mix.
Result<QuantizeOptions> MakeQuantizeOptions(std::string_view method, std::optional<std::string_view> scheme,
                                            std::optional<std::string_view> group_size);

std::string_view QuantMethodName(QuantMethod method);  // "fp8", "int8", "int4"
std::string_view QuantSchemeName(QuantScheme scheme);  // "per-channel", "per-group", "block"
// "float-quantized", "pack-quantized" (compressed-tensors formats) or "fp8" (transformers' fine-grained FP8).
std::string_view QuantFormatName(const QuantizeOptions& options);

// Decides for one planned output tensor (its name, shape, out_dtype, and rows/cols for merged ones): sets
// p.quantized (and p.rows/p.cols) and records it in `plan`, or records why a Linear weight is kept.
void PlanQuantizedTensor(PlannedTensor& p, const adapter::NamingTables& tables, const adapter::ArchTable* arch,
                         QuantizePlan& plan);
// After the last tensor: the ignore list in natural module order, with lm_head last.
void FinishQuantizePlan(QuantizePlan& plan);
// After FinishQuantizePlan: a quantization that quantizes no weight is refused (InvalidArgument, each class of
// weights and why it stays; for a group size that divides no in_features, one that would); otherwise
// plan.warnings gets one line per class of weights kept for a reason the libraries' defaults do not have
// (a dim the layout cannot divide, a dtype), so that nothing stays unquantized unsaid.
Status CheckQuantizePlan(QuantizePlan& plan);

// A weight's class: its name with the layer (and expert) numbers as `*`
// (`model.layers.*.mlp.experts.*.up_proj.weight`). The text summaries speak of classes, not of each weight: a model has
// hundreds of weights (an MoE tens of thousands), which --json lists one by one.
std::string WeightClass(std::string_view name);
// The weights kept unquantized, a line per (class, reason) in order of first appearance: "3 x `CLASS`: REASON".
std::vector<std::string> KeptClassLines(const QuantizePlan& plan);

// config.json's `quantization_config`: compressed-tensors' ModelCompressor.update_config (0.20.1) for the
// compressed-tensors layouts, transformers' FineGrainedFP8Config.to_dict() for block.
Json QuantizationConfigJson(const QuantizePlan& plan);
// The whole config.json text with it: compressed-tensors writes json.dump(indent=2, sort_keys=True) with no
// final newline; transformers' save_pretrained adds one.
std::string QuantizedConfigText(const Json& config, const QuantizePlan& plan);

}  // namespace pb::merge
