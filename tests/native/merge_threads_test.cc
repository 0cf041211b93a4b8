// `peft-bridge merge --threads N`: the regions of a shard are merged at once and written in place,
// and the output is byte for byte the single-threaded one, whatever N: plain, --dtype, DoRA, --quantize, a
// sharded base, unmerge. A failure reports the error --threads 1 reports and leaves nothing behind.
#ifdef PB_CLI_PATH
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "adapter_fixtures.h"
#include "cli_runner.h"

namespace pb::testing {
namespace {

namespace fs = std::filesystem;

CliResult Cli(const std::string& args) { return RunCli(args, /*with_stderr=*/true); }

// Every file of a directory, by name.
std::map<std::string, Bytes> Tree(const fs::path& dir) {
  std::map<std::string, Bytes> files;
  for (const auto& e : fs::directory_iterator(dir)) files[e.path().filename().string()] = ReadAll(e.path());
  return files;
}

class MergeThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pb_merge_threads_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "base");
    fs::create_directories(dir_ / "adapter");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A LLaMA-shaped BF16 model of `layers` layers (hidden 32, 4 heads, 2 kv heads, mlp 64) in one file, or in
  // two shards with an index; the adapter on q, v, o and down of every layer (DoRA: with magnitudes).
  void MakeModel(int layers, bool sharded, bool dora = false) {
    std::vector<std::vector<GenTensor>> shards(sharded ? 2 : 1);
    auto add = [&](int layer, std::string name, std::vector<uint64_t> shape) {
      shards[sharded && layer >= layers / 2 ? 1 : 0].push_back({std::move(name), Dtype::BF16, std::move(shape)});
    };
    add(0, "model.embed_tokens.weight", {64, 32});
    std::vector<GenTensor> lora;
    for (int l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      add(l, p + "self_attn.q_proj.weight", {32, 32});
      add(l, p + "self_attn.k_proj.weight", {16, 32});
      add(l, p + "self_attn.v_proj.weight", {16, 32});
      add(l, p + "self_attn.o_proj.weight", {32, 32});
      add(l, p + "mlp.gate_proj.weight", {64, 32});
      add(l, p + "mlp.up_proj.weight", {64, 32});
      add(l, p + "mlp.down_proj.weight", {32, 64});
      add(l, p + "input_layernorm.weight", {32});
      add(l, p + "post_attention_layernorm.weight", {32});
      for (auto [m, in, out] : {std::tuple{"self_attn.q_proj", 32, 32},
                                {"self_attn.v_proj", 32, 16},
                                {"self_attn.o_proj", 32, 32},
                                {"mlp.down_proj", 64, 32}}) {
        AddLinear(lora, p + m, 8, in, out);
        if (dora) lora.push_back({"base_model.model." + p + m + ".lora_magnitude_vector", Dtype::F32, {uint64_t(out)}});
      }
    }
    add(layers, "model.norm.weight", {32});
    add(layers, "lm_head.weight", {64, 32});
    if (!sharded) {
      WriteFile(dir_ / "base" / "model.safetensors", BuildSafetensors(shards[0], 1));
    } else {
      std::string map;
      uint64_t total = 0;
      for (size_t s = 0; s < 2; ++s) {
        const std::string name = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
        WriteFile(dir_ / "base" / name, BuildSafetensors(shards[s], 1 + s));
        for (const auto& t : shards[s]) {
          map += std::string(map.empty() ? "" : ", ") + "\"" + t.name + "\": \"" + name + "\"";
          total += 2 * t.shape[0] * (t.shape.size() > 1 ? t.shape[1] : 1);
        }
      }
      WriteFile(dir_ / "base" / "model.safetensors.index.json",
                "{\"metadata\": {\"total_size\": " + std::to_string(total) + "}, \"weight_map\": {" + map + "}}");
    }
    WriteFile(dir_ / "base" / "config.json", LlamaConfigJson(layers));
    WriteFile(dir_ / "adapter" / "adapter_model.safetensors", BuildSafetensors(lora, 3));
    WriteFile(
        dir_ / "adapter" / "adapter_config.json",
        PeftConfig(
            std::string(R"("r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj", "o_proj", "down_proj"])") +
            (dora ? R"(, "use_dora": true)" : "")));
  }

  // Merges with each thread count and checks every output file is the same bytes as with --threads 1.
  void ExpectSameBytes(const std::string& command, const std::string& extra) {
    std::map<std::string, Bytes> first;
    for (int threads : {1, 2, 3, 7}) {
      const std::string out = "out" + std::to_string(threads);
      fs::remove_all(dir_ / out);
      CliResult r = Cli(command + " --base " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() +
                        " --out " + (dir_ / out).string() + " --threads " + std::to_string(threads) + " " + extra);
      ASSERT_EQ(r.status, 0) << r.out;
      auto tree = Tree(dir_ / out);
      if (threads == 1) {
        first = std::move(tree);
        ASSERT_GE(first.size(), 2u);
        continue;
      }
      ASSERT_EQ(tree.size(), first.size()) << extra;
      for (const auto& [name, bytes] : first)
        EXPECT_TRUE(tree[name] == bytes) << name << " with --threads " << threads << " " << extra;
    }
  }
  fs::path dir_;
};

TEST_F(MergeThreads, OneFileSameBytesWithAnyThreadCount) {
  MakeModel(4, false);
  ExpectSameBytes("merge", "");
  ExpectSameBytes("merge", "--dtype f32 --safe");
}

TEST_F(MergeThreads, ShardedSameBytesWithAnyThreadCount) {
  MakeModel(4, true);
  ExpectSameBytes("merge", "--dtype f16");
  ExpectSameBytes("unmerge", "");
}

TEST_F(MergeThreads, DoraSameBytesWithAnyThreadCount) {
  MakeModel(3, false, /*dora=*/true);
  ExpectSameBytes("merge", "");
}

TEST_F(MergeThreads, QuantizeSameBytesWithAnyThreadCount) {
  MakeModel(3, true);
  ExpectSameBytes("merge", "--quantize int4 --group-size 16");
  ExpectSameBytes("merge", "--quantize fp8");
}

// Merged tensors whose base weights are NaN: --safe fails with the same message whatever the thread count, and
// the output directory is left as it was (absent).
TEST_F(MergeThreads, AFailureIsTheSingleThreadedOneAndLeavesNothing) {
  MakeModel(4, false);
  // Layer 3's down_proj (late in the file) and layer 1's q_proj (earlier) made NaN: the earliest failing tensor,
  // layer 1's, must be the one reported, as one thread reports it.
  auto file = ReadAll(dir_ / "base" / "model.safetensors");
  auto header = ParseWholeFile(file);
  ASSERT_TRUE(header.ok());
  for (const char* name : {"model.layers.1.self_attn.q_proj.weight", "model.layers.3.mlp.down_proj.weight"}) {
    TensorInfo t = header->tensor(*header->Find(name));
    for (uint64_t i = header->data_start() + t.begin; i < header->data_start() + t.end; i += 2) {
      file[i] = 0xC0;  // BF16 0x7FC0: NaN
      file[i + 1] = 0x7F;
    }
  }
  WriteFile(dir_ / "base" / "model.safetensors", file);
  std::string first;
  for (int threads : {1, 2, 3}) {
    CliResult r =
        Cli("merge --base " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() + " --out " +
            (dir_ / "out").string() + " --safe --no-progress -q --threads " + std::to_string(threads));
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("model.layers.1.self_attn.q_proj"), std::string::npos) << r.out;
    if (threads == 1) first = r.out;
    EXPECT_EQ(r.out, first) << "--threads " << threads;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "--threads " << threads;
  }
}

// A sharded base, merged shard by shard (--threads 1) or with its shards at once: a q_proj made NaN in every
// shard; the first shard's is reported whatever the thread count, and nothing is left.
TEST_F(MergeThreads, AFailureInShardsMergedAtOnceIsTheFirstShardsOne) {
  MakeModel(4, true);
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(dir_ / "base"))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path());
  std::sort(shards.begin(), shards.end());
  ASSERT_GE(shards.size(), 2u);
  std::string first_name;
  for (const auto& path : shards) {
    auto file = ReadAll(path);
    auto header = ParseWholeFile(file);
    ASSERT_TRUE(header.ok());
    for (size_t k = 0; k < header->tensor_count(); ++k) {
      TensorInfo t = header->tensor(k);
      if (std::string(t.name).find("q_proj.weight") == std::string::npos) continue;
      if (first_name.empty()) first_name = std::string(t.name);
      for (uint64_t i = header->data_start() + t.begin; i < header->data_start() + t.end; i += 2) {
        file[i] = 0xC0;  // BF16 0x7FC0: NaN
        file[i + 1] = 0x7F;
      }
      break;
    }
    WriteFile(path, file);
  }
  ASSERT_FALSE(first_name.empty());
  std::string first;
  for (int threads : {1, 2, 3}) {
    CliResult r =
        Cli("merge --base " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() + " --out " +
            (dir_ / "out").string() + " --safe --no-progress -q --threads " + std::to_string(threads));
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find(first_name), std::string::npos) << r.out;
    if (threads == 1) first = r.out;
    EXPECT_EQ(r.out, first) << "--threads " << threads;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "--threads " << threads;
  }
}

TEST_F(MergeThreads, ThreadsMustBeAPositiveWholeNumber) {
  MakeModel(1, false);
  for (const char* bad : {"0", "-1", "two", "1.5", "", "100000"}) {
    CliResult r = Cli("merge --base " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() +
                      " --out " + (dir_ / "out").string() + " --threads '" + bad + "'");
    EXPECT_EQ(r.status, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--threads must be a whole number from 1 to 1024"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace pb::testing
#endif
