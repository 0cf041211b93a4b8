// `peft-bridge merge` / `unmerge` run as a user would: sharded bases with an index, config.json edits,
// plan-time errors that write nothing, hostile shard names, dry runs, unmerge.
#ifdef PB_CLI_PATH
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "adapter_fixtures.h"
#include "cli_runner.h"

namespace pb::testing {
namespace {

namespace fs = std::filesystem;

CliResult Cli(const std::string& args) { return RunCli(args); }

class MergeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pb_merge_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "base");
    fs::create_directories(dir_ / "adapter");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A two-layer LLaMA-shaped BF16 base in two shards, and a LoRA on q_proj/v_proj of both layers.
  void MakeShardedBase(const std::string& adapter_targets = R"(["q_proj", "v_proj"])") {
    std::vector<GenTensor> s1 = {{"model.embed_tokens.weight", Dtype::BF16, {64, 32}},
                                 {"model.layers.0.self_attn.q_proj.weight", Dtype::BF16, {32, 32}},
                                 {"model.layers.0.self_attn.v_proj.weight", Dtype::BF16, {16, 32}}};
    std::vector<GenTensor> s2 = {{"model.layers.1.self_attn.q_proj.weight", Dtype::BF16, {32, 32}},
                                 {"model.layers.1.self_attn.v_proj.weight", Dtype::BF16, {16, 32}},
                                 {"model.norm.weight", Dtype::BF16, {32}},
                                 {"lm_head.weight", Dtype::BF16, {64, 32}}};
    WriteFile(dir_ / "base" / "model-00001-of-00002.safetensors", BuildSafetensors(s1, 1));
    WriteFile(dir_ / "base" / "model-00002-of-00002.safetensors", BuildSafetensors(s2, 2));
    nlohmann::ordered_json index;
    index["metadata"]["total_size"] = 2 * (64 * 32 + 32 * 32 + 16 * 32) + 2 * (32 * 32 + 16 * 32 + 32 + 64 * 32);
    for (const auto& t : s1) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
    for (const auto& t : s2) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
    WriteFile(dir_ / "base" / "model.safetensors.index.json", index.dump(2));
    WriteFile(dir_ / "base" / "config.json", LlamaConfigJson());
    std::vector<GenTensor> lora;
    for (int l = 0; l < 2; ++l) {
      AddLinear(lora, "model.layers." + std::to_string(l) + ".self_attn.q_proj", 4, 32, 32);
      AddLinear(lora, "model.layers." + std::to_string(l) + ".self_attn.v_proj", 4, 32, 16);
    }
    WriteFile(dir_ / "adapter" / "adapter_model.safetensors", BuildSafetensors(lora, 3));
    WriteFile(dir_ / "adapter" / "adapter_config.json",
              PeftConfig(R"("r": 4, "lora_alpha": 8, "target_modules": )" + adapter_targets));
  }
  std::string Args(const std::string& out = "out") {
    return "--base " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() + " --out " +
           (dir_ / out).string();
  }
  fs::path dir_;
};

TEST_F(MergeCli, ShardedBaseKeepsItsShardingAndIndex) {
  MakeShardedBase();
  CliResult r = Cli("merge " + Args() + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["modulesMatched"], 4);
  EXPECT_EQ(summary["tensorsMerged"], 4);
  EXPECT_EQ(summary["arch"], "llama");
  for (const char* f : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json", "config.json"})
    EXPECT_TRUE(fs::exists(dir_ / "out" / f)) << f;
  // Same dtype: the index is unchanged but rewritten with the recomputed total_size.
  auto index = nlohmann::json::parse(std::ifstream(dir_ / "out" / "model.safetensors.index.json"));
  auto original = nlohmann::json::parse(std::ifstream(dir_ / "base" / "model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"], original["weight_map"]);
  EXPECT_EQ(index["metadata"]["total_size"], original["metadata"]["total_size"]);
  // Untouched tensors are bitwise the same; merged ones differ.
  auto in = ReadAll(dir_ / "base" / "model-00002-of-00002.safetensors");
  auto out = ReadAll(dir_ / "out" / "model-00002-of-00002.safetensors");
  auto hi = ParseWholeFile(in), ho = ParseWholeFile(out);
  ASSERT_TRUE(hi.ok() && ho.ok());
  auto bytes = [](const Header& h, const Bytes& f, const std::string& n) {
    TensorInfo t = h.tensor(*h.Find(n));
    return Bytes(f.begin() + h.data_start() + t.begin, f.begin() + h.data_start() + t.end);
  };
  EXPECT_EQ(bytes(hi.value(), in, "lm_head.weight"), bytes(ho.value(), out, "lm_head.weight"));
  EXPECT_NE(bytes(hi.value(), in, "model.layers.1.self_attn.q_proj.weight"),
            bytes(ho.value(), out, "model.layers.1.self_attn.q_proj.weight"));
  // config.json needed no edit: passed through byte for byte.
  EXPECT_EQ(ReadAll(dir_ / "out" / "config.json"), ReadAll(dir_ / "base" / "config.json"));
}

TEST_F(MergeCli, DtypeChangesTotalSizeAndConfig) {
  MakeShardedBase();
  ASSERT_EQ(Cli("merge " + Args() + " --dtype f32").status, 0);
  auto index = nlohmann::json::parse(std::ifstream(dir_ / "out" / "model.safetensors.index.json"));
  auto original = nlohmann::json::parse(std::ifstream(dir_ / "base" / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), 2 * original["metadata"]["total_size"].get<uint64_t>());
  auto h = ParseWholeFile(ReadAll(dir_ / "out" / "model-00001-of-00002.safetensors"));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->tensor(0).dtype, Dtype::F32);
}

TEST_F(MergeCli, MismatchesAreAllReportedAndNothingIsWritten) {
  MakeShardedBase(R"(["q_proj", "v_proj", "o_proj"])");
  std::vector<GenTensor> lora;
  AddLinear(lora, "model.layers.0.self_attn.q_proj", 4, 32, 48);  // wrong out
  AddLinear(lora, "model.layers.0.self_attn.o_proj", 4, 32, 32);  // not in the base
  WriteFile(dir_ / "adapter" / "adapter_model.safetensors", BuildSafetensors(lora, 3));
  CliResult r = Cli("merge " + Args() + " --json");
  EXPECT_EQ(r.status, 1);
  auto e = nlohmann::json::parse(r.out);
  // A module the base lacks makes it ModulesNotFound (its own code); each problem keeps its code in "problems".
  EXPECT_EQ(e["error"]["code"], "ModulesNotFound");
  std::string message = e["error"]["message"];
  EXPECT_NE(message.find("q_proj"), std::string::npos) << message;
  EXPECT_NE(message.find("o_proj"), std::string::npos) << message;
  ASSERT_EQ(e["error"]["problems"].size(), 2u) << r.out;
  EXPECT_EQ(e["error"]["problems"][0]["code"], "ModulesNotFound");
  EXPECT_EQ(e["error"]["problems"][0]["module"], "model.layers.0.self_attn.o_proj");
  EXPECT_EQ(e["error"]["problems"][1]["code"], "ShapeMismatch");
  EXPECT_EQ(e["error"]["problems"][1]["module"], "model.layers.0.self_attn.q_proj");
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(MergeCli, ShardNamesThatLeaveTheDirectoryAreRefused) {
  MakeShardedBase();
  for (const char* name : {"../evil.safetensors", "/etc/passwd", "sub/x.safetensors", "..", "x.bin"}) {
    nlohmann::json index;
    index["weight_map"]["model.norm.weight"] = name;
    WriteFile(dir_ / "base" / "model.safetensors.index.json", index.dump());
    CliResult r = Cli("merge " + Args() + " --json");
    EXPECT_EQ(r.status, 1) << name;
    EXPECT_EQ(nlohmann::json::parse(r.out)["error"]["code"], "InvalidConfig") << name;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(MergeCli, DryRunWritesNothingAndUnmergeRestoresAnF32Base) {
  MakeShardedBase();
  CliResult dry = Cli("merge " + Args() + " --dry-run --json");
  ASSERT_EQ(dry.status, 0);
  EXPECT_TRUE(nlohmann::json::parse(dry.out)["dryRun"]);
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  // F32 round trip: merge then unmerge gives back the base within a few ulp.
  ASSERT_EQ(Cli("merge " + Args("merged") + " --dtype f32").status, 0);
  fs::rename(dir_ / "base", dir_ / "orig");
  fs::rename(dir_ / "merged", dir_ / "base");
  ASSERT_EQ(Cli("unmerge " + Args("restored")).status, 0);
  auto a = ReadAll(dir_ / "orig" / "model-00001-of-00002.safetensors");
  auto b = ReadAll(dir_ / "restored" / "model-00001-of-00002.safetensors");
  auto ha = ParseWholeFile(a), hb = ParseWholeFile(b);
  ASSERT_TRUE(ha.ok() && hb.ok());
  TensorInfo ta = ha->tensor(*ha->Find("model.layers.0.self_attn.q_proj.weight"));
  TensorInfo tb = hb->tensor(*hb->Find("model.layers.0.self_attn.q_proj.weight"));
  for (uint64_t i = 0; i < ta.element_count(); ++i) {
    uint16_t bf;
    float f;
    std::memcpy(&bf, &a[ha->data_start() + ta.begin + 2 * i], 2);
    std::memcpy(&f, &b[hb->data_start() + tb.begin + 4 * i], 4);
    uint32_t wide = static_cast<uint32_t>(bf) << 16;
    float orig;
    std::memcpy(&orig, &wide, 4);
    EXPECT_NEAR(f, orig, 1e-6f + std::fabs(orig) * 1e-6f) << i;
  }
}

// `adapter` (a safetensors file) rewritten with an unused tensor of `huge` bytes first, backed by a sparse file
// (ftruncate): every LoRA tensor then lies beyond `huge` bytes into the data, and the file is `huge` bytes
// larger, without using the disk space.
void WriteSparseAdapter(const fs::path& path, const Bytes& adapter, uint64_t huge) {
  auto header = ParseWholeFile(adapter);
  ASSERT_TRUE(header.ok());
  nlohmann::ordered_json j;
  j["__metadata__"] = {{"format", "pt"}};
  // An F32 tensor of huge / 4 elements, split over two dimensions so no single one needs to be that large.
  j["base_model.model.aaa_unused_block.weight"] = {
      {"dtype", "F32"}, {"shape", {huge / 4 / 1024, 1024}}, {"data_offsets", {0, huge}}};
  for (size_t i = 0; i < header->tensor_count(); ++i) {
    TensorInfo t = header->tensor(i);
    j[std::string(t.name)] = {{"dtype", std::string(DtypeName(t.dtype))},
                              {"shape", std::vector<uint64_t>(t.shape.begin(), t.shape.end())},
                              {"data_offsets", {huge + t.begin, huge + t.end}}};
  }
  std::string text = j.dump();
  Bytes head(8);
  for (int b = 0; b < 8; ++b) head[b] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * b));
  head.insert(head.end(), text.begin(), text.end());
  WriteFile(path, head);
  const uint64_t data_start = head.size();
  fs::resize_file(path, data_start + huge + header->data_size());
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(data_start + huge));
  f.write(reinterpret_cast<const char*>(adapter.data() + header->data_start()),
          static_cast<std::streamsize>(header->data_size()));
}

TEST_F(MergeCli, AnAdapterOver2GiBIsReadByRangeNotWhole) {
  MakeShardedBase();
  ASSERT_EQ(Cli("merge " + Args("small") + " --json").status, 0);
  const Bytes compact = ReadAll(dir_ / "adapter" / "adapter_model.safetensors");
  constexpr uint64_t kHuge = uint64_t{3} << 30;  // 3 GiB: every LoRA tensor's offset is past 2^31 and 2^32 - 1
  WriteSparseAdapter(dir_ / "adapter" / "adapter_model.safetensors", compact, kHuge);
  ASSERT_GT(fs::file_size(dir_ / "adapter" / "adapter_model.safetensors"), kHuge);
  // The 3 GiB block is no LoRA factor (PEFT would not load it): the merge drops it only when told to.
  CliResult merged = Cli("merge " + Args("big") + " --json --allow-partial");
  ASSERT_EQ(merged.status, 0) << merged.out;
  for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
    EXPECT_TRUE(ReadAll(dir_ / "small" / shard) == ReadAll(dir_ / "big" / shard)) << shard;
  // The merge read the factors only: far less than the file (peak RSS well under the 3 GiB tensor).
  EXPECT_LT(nlohmann::json::parse(merged.out)["peakMemory"].get<double>(), 512.0 * (1 << 20));
  CliResult info = Cli("adapter-info " + (dir_ / "adapter").string() + " --json");
  ASSERT_EQ(info.status, 0) << info.out;
  auto j = nlohmann::json::parse(info.out);
  ASSERT_EQ(j["rejected"].size(), 1u);
  EXPECT_EQ(j["rejected"][0]["tensor"], "base_model.model.aaa_unused_block.weight");
  EXPECT_EQ(j["modules"].size(), 4u);
  EXPECT_GT(j["modules"][0]["deltaNorm"].get<double>(), 0.0);
}

}  // namespace
}  // namespace pb::testing
#endif
