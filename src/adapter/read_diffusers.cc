// diffusers' attention-processor LoRA files (save_attn_procs, 2023): <block>.processor.to_q_lora.down.weight
// (A) and .up.weight (B), module paths spelled differently from the UNet's (the format table's path_rewrites
// map "x.processor.to_out" to "x.to_out.0"), no config and no alpha: the scale is 1 (alpha = rank), as
// LoRAAttnProcessor applies them with network_alpha None.
#include "adapter/format_internal.h"

namespace pb::adapter::internal {

Result<ReadResult> ReadDiffusersAttnProc(ReadState& state) {
  const FormatTable& table = BuiltinFormatTable(AdapterFormat::kDiffusersAttnProc);
  for (size_t i = 0; i < state.header.tensor_count(); ++i) {
    const std::string name(state.header.tensor(i).name);
    auto key = SplitFormatKey(table, name);
    if (!key) {
      state.Reject(name,
                   "not a diffusers attention-processor LoRA tensor (expected *_lora.down.weight / *_lora.up.weight)");
      continue;
    }
    const std::string module = RewritePath(table, key->spelled_path);
    const PeftRole role = key->spelling->role == FormatRole::kLoraA ? PeftRole::kLoraA : PeftRole::kLoraB;
    state.AddRole(name, module, role, state.Load(i), module == key->spelled_path ? "copy" : "rename");
  }
  std::vector<std::pair<std::string, std::pair<int64_t, double>>> rank_alpha;
  for (const auto& rt : state.role_tensors)
    if (rt.role == PeftRole::kLoraA) {
      const auto r = static_cast<int64_t>(rt.tensor.shape[0]);
      rank_alpha.push_back({rt.module, {r, static_cast<double>(r)}});
    }
  PB_ASSIGN_OR_RETURN(auto config, ConfigFromDocument(SynthesizeConfig(rank_alpha, false, std::nullopt)));
  return state.Finish(std::move(config));
}

}  // namespace pb::adapter::internal
