// Where a checkpoint keeps the values of transformers 5's fused experts parameters. The model holds
// `<holder>.gate_up_proj` [E, 2·I, H] and `<holder>.down_proj` [E, H, I] (holder "model.layers.N.mlp.experts"),
// but most checkpoints store the experts one by one, as nn.Linear weights that transformers fuses when it loads
// them and splits again when it saves (conversion_mapping.py, transformers 5.24):
//   qwen2_moe and the 27 model types mapped to it (qwen3_moe, olmoe, deepseek_v2/v3, glm4_moe, ...):
//     <holder>.{e}.gate_proj.weight, <holder>.{e}.up_proj.weight -> gate_up_proj[e] = cat(gate, up) (rows)
//     <holder>.{e}.down_proj.weight                              -> down_proj[e]
//   mixtral (and minimax, minimax_m2), with `.mlp.` spelled `.block_sparse_moe.` on disk:
//     ...experts.{e}.w1.weight, ...experts.{e}.w3.weight -> gate_up_proj[e];  ...experts.{e}.w2.weight -> down_proj[e]
// A PEFT adapter on such a parameter merges into those per-expert tensors, each one a row range of expert e's
// [2·I, H] (or [H, I]) matrix.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pb::merge {

// The per-expert tensors holding expert e's rows of `<holder>.<parameter>`, in row order (gate before up), for
// every e < experts: names as the checkpoint spells them (`exists` says whether the base has a tensor). nullopt
// when no known layout has all of them.
std::optional<std::vector<std::vector<std::string>>> PerExpertTensors(
    const std::string& holder, const std::string& parameter, uint64_t experts,
    const std::function<bool(const std::string&)>& exists);

}  // namespace pb::merge
