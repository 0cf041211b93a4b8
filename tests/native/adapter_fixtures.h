// Generated PEFT adapters for the adapter tests: every LoRA variant, built in memory with deterministic
// pseudo-random values, written with the library's own safetensors writer in PEFT's tensor order.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "kernels/convert.h"
#include "test_util.h"

namespace pb::testing {

// A tiny deterministic generator (xorshift); values in [-1, 1).
class Values {
 public:
  explicit Values(uint64_t seed) : state_(seed * 2654435761u + 1) {}
  float Next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return static_cast<float>(static_cast<double>(state_ >> 11) / 4503599627370496.0 - 1.0);
  }

 private:
  uint64_t state_;
};

struct GenTensor {
  std::string name;
  Dtype dtype;
  std::vector<uint64_t> shape;
};

// Bytes of `n` values in `dtype` (F32 values rounded to nearest even for narrower floats).
inline Bytes RandomBytes(Dtype dtype, uint64_t n, Values& values) {
  std::vector<float> f(n);
  for (auto& v : f) v = values.Next();
  Bytes out(n * DtypeBits(dtype) / 8);
  kernels::ConvertElements(Dtype::F32, dtype, f.data(), out.data(), n);
  return out;
}

inline Bytes BuildSafetensors(const std::vector<GenTensor>& tensors, uint64_t seed,
                              std::optional<Metadata> metadata = Metadata{{"format", "pt"}}) {
  adapter::SafetensorsOutput out;
  Values values(seed);
  for (const auto& t : tensors) {
    uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    out.tensors.push_back({t.name, t.dtype, t.shape});
    out.data.push_back(RandomBytes(t.dtype, n, values));
  }
  out.metadata = std::move(metadata);
  VectorSink sink;
  Status s = adapter::EmitSafetensors(out, sink);
  if (!s.ok()) throw std::runtime_error(s.error().message);
  return sink.bytes;
}

// A generated adapter: the config text and the safetensors bytes, kept alive for an AdapterSource.
struct GeneratedAdapter {
  std::string config;
  Bytes weights;
  std::optional<std::string> base_config;
  adapter::AdapterSource source() const { return {"adapter_model.safetensors", weights, config, base_config}; }
};

// LoRA factors for one module in PEFT's key form.
inline void AddLinear(std::vector<GenTensor>& t, const std::string& module, uint64_t r, uint64_t in, uint64_t out,
                      Dtype dtype = Dtype::F32) {
  t.push_back({"base_model.model." + module + ".lora_A.weight", dtype, {r, in}});
  t.push_back({"base_model.model." + module + ".lora_B.weight", dtype, {out, r}});
}

// A small LLaMA-shaped model's module paths: layers x {q,k,v,o} with hidden 32, 4 heads (2 kv heads: k/v 16).
inline std::string LlamaConfigJson(int layers = 2) {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, )"
         R"("num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": )" +
         std::to_string(layers) + R"(, "vocab_size": 64, "tie_word_embeddings": false})";
}

inline std::string PeftConfig(const std::string& extra_fields) {
  std::string base = R"({"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": "tiny-llama")";
  return base + (extra_fields.empty() ? "" : ", " + extra_fields) + "}";
}

}  // namespace pb::testing
