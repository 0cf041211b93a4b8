// Writes a LLaMA-7B-shaped model (hidden 4096, intermediate 11008, 32 heads, vocab 32000, BF16) with a
// chosen number of layers, split into two shards with model.safetensors.index.json and config.json, plus a
// PEFT LoRA adapter (r = 16 on q, k, v, o) - the input of the whole-model merge benchmark
// (bench/merge_model_bench.sh). Values are cheap deterministic patterns: the merge's speed does not depend
// on them.
//
//   make_llama_model OUT_DIR LAYERS [RANK=16] [--rank N] [--single-file] [--targets q_proj,v_proj,...]
//
// --single-file writes one model.safetensors (no index) instead of two shards (bench/merge_threads_bench.sh);
// --targets chooses the adapter's modules among the attention projections (default q_proj,k_proj,v_proj,o_proj).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "core/writer.h"
#include "kernels/convert.h"

namespace {

using namespace pb;

constexpr uint64_t kHidden = 4096, kInter = 11008, kVocab = 32000;

class FileSink : public ByteSink {
 public:
  explicit FileSink(const std::string& path) : f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) std::perror(path.c_str()), std::exit(1);
  }
  ~FileSink() override { std::fclose(f_); }
  Status Write(std::span<const uint8_t> b) override {
    if (std::fwrite(b.data(), 1, b.size(), f_) != b.size()) return MakeError(ErrorCode::IoError, "write failed");
    return Status::Ok();
  }

 private:
  FILE* f_;
};

// BF16 values of magnitude ~0.02 with a varying mantissa, generated a block at a time.
void WriteTensor(StreamingWriter& w, uint64_t elements, uint32_t seed) {
  std::vector<uint16_t> block(1 << 20);
  uint32_t x = seed * 2654435761u + 1;
  for (uint64_t done = 0; done < elements;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), elements - done));
    for (size_t i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      block[i] = static_cast<uint16_t>(0x3C00 | ((x >> 16) & 0x83FF));  // +-[0.0078, 0.0156)
    }
    if (!w.Write({reinterpret_cast<const uint8_t*>(block.data()), n * 2}).ok()) std::exit(1);
    done += n;
  }
}

void WriteFile(const std::string& path, const std::vector<TensorSpec>& specs) {
  auto plan = PlanWrite(specs, Metadata{{"format", "pt"}}, TensorOrder::kInput);
  if (!plan.ok()) std::fprintf(stderr, "%s\n", plan.error().message.c_str()), std::exit(1);
  FileSink sink(path);
  StreamingWriter w(std::move(plan.value()), sink);
  if (!w.Begin().ok()) std::exit(1);
  uint32_t seed = 1;
  for (const auto& t : w.plan().tensors) {
    uint64_t n = 1;
    for (auto d : specs[t.input_index].shape) n *= d;
    WriteTensor(w, n, seed++);
  }
  if (!w.Finish().ok()) std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    return std::fprintf(stderr, "usage: make_llama_model OUT_DIR LAYERS [RANK=16] [--rank N] [--single-file] "
                                "[--targets q_proj,v_proj,...]\n"),
           2;
  }
  const std::string out = argv[1];
  const int layers = std::atoi(argv[2]);
  // A larger rank makes a large adapter (r = 2048 on 4 layers: 1 GiB) for the adapter-memory measurement.
  uint64_t kRank = 16;
  bool single = false;
  std::vector<std::string> targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rank" && i + 1 < argc) {
      kRank = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--single-file") {
      single = true;
    } else if (a == "--targets" && i + 1 < argc) {
      targets.clear();
      for (std::string list = argv[++i]; !list.empty();) {
        const size_t comma = list.find(',');
        targets.push_back(list.substr(0, comma));
        list = comma == std::string::npos ? "" : list.substr(comma + 1);
      }
    } else if (i == 3 && a[0] != '-') {
      kRank = std::strtoull(a.c_str(), nullptr, 10);
    } else {
      return std::fprintf(stderr, "make_llama_model: unknown argument `%s`\n", a.c_str()), 2;
    }
  }
  std::string target_list;
  for (const auto& t : targets) target_list += std::string(target_list.empty() ? "" : ", ") + "\"" + t + "\"";
  std::vector<std::vector<TensorSpec>> shards(2);
  std::string weight_map;
  auto add = [&](size_t shard, std::string name, std::vector<uint64_t> shape) {
    weight_map += std::string(weight_map.empty() ? "" : ",\n") + "    \"" + name + "\": \"model-0000" +
                  std::to_string(shard + 1) + "-of-00002.safetensors\"";
    shards[shard].push_back({std::move(name), Dtype::BF16, std::move(shape)});
  };
  add(0, "model.embed_tokens.weight", {kVocab, kHidden});
  for (int l = 0; l < layers; ++l) {
    size_t s = single || l < layers / 2 ? 0 : 1;
    std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"})
      add(s, p + "self_attn." + m + ".weight", {kHidden, kHidden});
    add(s, p + "mlp.gate_proj.weight", {kInter, kHidden});
    add(s, p + "mlp.up_proj.weight", {kInter, kHidden});
    add(s, p + "mlp.down_proj.weight", {kHidden, kInter});
    add(s, p + "input_layernorm.weight", {kHidden});
    add(s, p + "post_attention_layernorm.weight", {kHidden});
  }
  add(single ? 0 : 1, "model.norm.weight", {kHidden});
  add(single ? 0 : 1, "lm_head.weight", {kVocab, kHidden});
  uint64_t total = 0;
  if (single) {
    for (const auto& t : shards[0]) {
      uint64_t n = 2;
      for (auto d : t.shape) n *= d;
      total += n;
    }
    WriteFile(out + "/model.safetensors", shards[0]);
  }
  for (size_t s = 0; s < 2 && !single; ++s) {
    for (const auto& t : shards[s]) {
      uint64_t n = 2;
      for (auto d : t.shape) n *= d;
      total += n;
    }
    WriteFile(out + "/model-0000" + std::to_string(s + 1) + "-of-00002.safetensors", shards[s]);
  }
  FILE* f = nullptr;
  if (!single) {
    f = std::fopen((out + "/model.safetensors.index.json").c_str(), "w");
    std::fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n%s\n  }\n}\n",
                 static_cast<unsigned long long>(total), weight_map.c_str());
    std::fclose(f);
  }
  f = std::fopen((out + "/config.json").c_str(), "w");
  std::fprintf(
      f,
      "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 4096,\n  \"intermediate_size\": 11008,\n"
      "  \"model_type\": \"llama\",\n  \"num_attention_heads\": 32,\n  \"num_hidden_layers\": %d,\n"
      "  \"num_key_value_heads\": 32,\n  \"tie_word_embeddings\": false,\n  \"torch_dtype\": \"bfloat16\",\n"
      "  \"vocab_size\": 32000\n}\n",
      layers);
  std::fclose(f);
  // The adapter: F32 like PEFT's default, r = RANK (16), alpha 2r on the attention projections --targets names.
  std::vector<TensorSpec> lora;
  for (int l = 0; l < layers; ++l)
    for (const auto& m : targets) {
      std::string p = "base_model.model.model.layers." + std::to_string(l) + ".self_attn." + m;
      lora.push_back({p + ".lora_A.weight", Dtype::F32, {kRank, kHidden}});
      lora.push_back({p + ".lora_B.weight", Dtype::F32, {kHidden, kRank}});
    }
  adapter::SafetensorsOutput a;
  a.metadata = Metadata{{"format", "pt"}};
  uint32_t x = 7;
  for (const auto& t : lora) {
    std::vector<float> v(t.shape[0] * t.shape[1]);
    for (auto& e : v) e = static_cast<float>(static_cast<int32_t>(x = x * 1664525u + 1013904223u)) * 1e-11f;
    a.tensors.push_back(t);
    a.data.emplace_back(reinterpret_cast<uint8_t*>(v.data()), reinterpret_cast<uint8_t*>(v.data()) + v.size() * 4);
  }
  std::string adir = out + "/adapter";
  std::string mk = "mkdir -p '" + adir + "'";
  if (std::system(mk.c_str()) != 0) return 1;
  {
    FileSink sink(adir + "/adapter_model.safetensors");
    if (!adapter::EmitSafetensors(a, sink).ok()) return 1;
  }
  f = std::fopen((adir + "/adapter_config.json").c_str(), "w");
  std::fprintf(f,
               "{\"peft_type\": \"LORA\", \"task_type\": \"CAUSAL_LM\", \"r\": %llu, \"lora_alpha\": %llu, "
               "\"target_modules\": [%s]}",
               static_cast<unsigned long long>(kRank), static_cast<unsigned long long>(2 * kRank), target_list.c_str());
  std::fclose(f);
  std::printf("wrote %d layers, %.2f GB of weights, to %s\n", layers, static_cast<double>(total) / 1e9, out.c_str());
  return 0;
}
