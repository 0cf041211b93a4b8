// Synthetic inputs for the benchmarks: realistic safetensors headers and files, built with the
// project's own writer (PlanWrite), so the bytes are exactly what peft-bridge would emit.
// The declarations are repeated at the top of pb_bench.cc and header_peak.cc (bench/ has no header).
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/writer.h"

namespace pb::bench {

// Page-aligned, pre-faulted anonymous memory (every page touched, so no page faults in timed loops).
uint8_t* AllocPages(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) std::abort();
  std::memset(p, 0x5A, bytes);
  return static_cast<uint8_t*>(p);
}

void FreePages(uint8_t* p, size_t bytes) {
  if (p) munmap(p, bytes);
}

// A mixture-of-experts checkpoint's tensor list in the Hugging Face naming scheme
// ("model.layers.37.mlp.experts.113.gate_proj.weight"), BF16, `count` tensors exactly.
// Per layer: 4 attention projections, 2 norms, the router, 256 experts x 3 projections.
std::vector<TensorSpec> MoeSpecs(size_t count) {
  constexpr uint64_t kHidden = 2048, kExpertInter = 768, kExperts = 256, kHeads = 32, kKvHeads = 4, kHeadDim = 128,
                     kVocab = 151936;
  std::vector<TensorSpec> specs;
  specs.reserve(count);
  auto add = [&](std::string name, std::vector<uint64_t> shape) {
    if (specs.size() < count) specs.push_back({std::move(name), Dtype::BF16, std::move(shape)});
  };
  add("model.embed_tokens.weight", {kVocab, kHidden});
  add("lm_head.weight", {kVocab, kHidden});
  add("model.norm.weight", {kHidden});
  for (size_t layer = 0; specs.size() < count; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    add(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden});
    add(p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden});
    add(p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden});
    add(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim});
    add(p + "input_layernorm.weight", {kHidden});
    add(p + "post_attention_layernorm.weight", {kHidden});
    add(p + "mlp.gate.weight", {kExperts, kHidden});
    for (size_t e = 0; e < kExperts; ++e) {
      const std::string q = p + "mlp.experts." + std::to_string(e) + ".";
      add(q + "gate_proj.weight", {kExpertInter, kHidden});
      add(q + "up_proj.weight", {kExpertInter, kHidden});
      add(q + "down_proj.weight", {kHidden, kExpertInter});
    }
  }
  return specs;
}

// A LoRA adapter's tensor list: `count` tensors (count/2 A/B pairs), each `elements` elements of `dtype`,
// PEFT names ("base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight").
std::vector<TensorSpec> LoraSpecs(size_t count, Dtype dtype, uint64_t elements) {
  static const char* kProj[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj",    "mlp.extra_proj"};
  constexpr uint64_t kRank = 16;
  std::vector<TensorSpec> specs;
  specs.reserve(count);
  for (size_t i = 0; specs.size() < count; ++i) {
    const std::string base = "base_model.model.model.layers." + std::to_string(i / 8) + "." + kProj[i % 8];
    specs.push_back({base + ".lora_A.weight", dtype, {kRank, elements / kRank}});
    if (specs.size() < count) specs.push_back({base + ".lora_B.weight", dtype, {elements / kRank, kRank}});
  }
  return specs;
}

// The prefix + header bytes the writer emits for `specs` (reference order, {"format": "pt"} metadata);
// `file_size` receives the size of the whole file the header describes.
std::string HeaderBytes(const std::vector<TensorSpec>& specs, TensorOrder order, uint64_t* file_size) {
  auto plan = PlanWrite(specs, Metadata{{"format", "pt"}}, order);
  if (!plan.ok()) std::abort();
  if (file_size) *file_size = plan->total_size();
  return std::move(plan->header);
}

}  // namespace pb::bench
