// The native CLI's outputs on disk: an input inside OUT (any flag) is never written over, SIGINT at any moment of a
// `merge --force` leaves the old model or the new one and nothing else, a killed run's temporaries are removed by
// the next run, and a base of hundreds (and 3,000) of shards merges under a descriptor limit below its shard count.
// tests/js/outputs-interrupted.test.mjs runs the same cases through both CLIs.
#ifdef PB_CLI_PATH
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "adapter_fixtures.h"
#include "cli_runner.h"

namespace pb::testing {
namespace {

namespace fs = std::filesystem;
using Tree = std::map<std::string, Bytes>;

class OutputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pb_output_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A 4-wide LLaMA-shaped F32 base, one shard per layer (q_proj, v_proj), and an r=2 adapter on all of them.
  void MakeModel(int layers) {
    fs::create_directories(dir_ / "base");
    fs::create_directories(dir_ / "adapter");
    nlohmann::ordered_json index;
    index["metadata"]["total_size"] = 128 * layers;
    std::vector<GenTensor> lora;
    char width[16];
    std::snprintf(width, sizeof width, "%05d", layers);
    for (int l = 0; l < layers; ++l) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05d-of-%s.safetensors", l + 1, width);
      const std::string q = "model.layers." + std::to_string(l) + ".self_attn.q_proj",
                        v = "model.layers." + std::to_string(l) + ".self_attn.v_proj";
      WriteFile(dir_ / "base" / name,
                BuildSafetensors({{q + ".weight", Dtype::F32, {4, 4}}, {v + ".weight", Dtype::F32, {4, 4}}}, l + 1));
      index["weight_map"][q + ".weight"] = name;
      index["weight_map"][v + ".weight"] = name;
      AddLinear(lora, q, 2, 4, 4);
      AddLinear(lora, v, 2, 4, 4);
    }
    WriteFile(dir_ / "base" / "model.safetensors.index.json", index.dump());
    WriteFile(dir_ / "base" / "config.json",
              R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4})");
    WriteFile(dir_ / "adapter" / "adapter_model.safetensors", BuildSafetensors(lora, 99));
    WriteFile(dir_ / "adapter" / "adapter_config.json",
              PeftConfig(R"("r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"])"));
  }
  std::string Merge(const std::string& out) {
    return std::string(PB_CLI_PATH) + " merge --base " + (dir_ / "base").string() + " --adapter " +
           (dir_ / "adapter").string() + " --out " + (dir_ / out).string() + " -q";
  }
  Tree Snapshot(const std::string& out) {
    Tree t;
    for (const auto& e : fs::directory_iterator(dir_ / out)) t[e.path().filename().string()] = ReadAll(e.path());
    return t;
  }
  static bool Leftover(const std::string& name) {
    return name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos ||
           name == ".peft-bridge-commit";
  }
  fs::path dir_;
};

int Shell(const std::string& command) {
  const int st = std::system(command.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Runs `command` (no shell), sends `sig` after `delay`, returns once it has exited.
void Interrupt(const std::string& command, int sig, std::chrono::microseconds delay) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command + " >/dev/null 2>&1").c_str(), nullptr);
    ::_exit(127);
  }
  std::this_thread::sleep_for(delay);
  ::kill(pid, sig);
  int st;
  ::waitpid(pid, &st, 0);
}

TEST_F(OutputCli, ANamingTableInsideOutIsNeverWrittenOverOrRemoved) {
  MakeModel(2);
  fs::create_directories(dir_ / "out");
  const std::string table =
      R"({"model_types": ["toymodel"], "architectures": ["ToyForCausalLM"], "gguf_arch": "toy",)"
      R"( "body_prefixes": ["model."], "modules": [{"hf": "blocks.{N}.attn.wq",)"
      R"( "canonical": "layers/{N}/attention/query", "gguf": "blk.{N}.attn_q", "kind": "linear"}]})";
  WriteFile(dir_ / "out" / "config.json", table);
  WriteFile(dir_ / "out" / "adapter_config.json", table);
  for (const char* name : {"config.json", "adapter_config.json"}) {
    const fs::path path = dir_ / "out" / name;
    CliResult r = RunCli("merge --base " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() +
                             " --out " + (dir_ / "out").string() + " --force --naming-table " + path.string(),
                         true);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("is --naming-table `" + path.string() + "`; merge never writes over its inputs"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(ReadAll(path), Bytes(table.begin(), table.end()));
  }
  EXPECT_EQ(Snapshot("out").size(), 2u);
}

TEST_F(OutputCli, SigintDuringMergeForceLeavesTheOldOrTheNewModelOnly) {
  MakeModel(24);
  ASSERT_EQ(Shell(Merge("old") + " --dtype f16"), 0);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Shell(Merge("new")), 0);
  const auto length = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  const Tree old_model = Snapshot("old"), new_model = Snapshot("new");
  std::mt19937 random(7);
  int outcomes[2] = {0, 0}, trials = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (; trials < 100 && std::chrono::steady_clock::now() < deadline; ++trials) {
    fs::remove_all(dir_ / "out");
    fs::copy(dir_ / "old", dir_ / "out");
    // Half over the whole run, half over its end (where the files are renamed into place).
    const double f = trials % 2 ? std::uniform_real_distribution<double>(0, 1.1)(random)
                                : std::uniform_real_distribution<double>(0.6, 1.1)(random);
    Interrupt(Merge("out") + " --force", SIGINT, std::chrono::microseconds(static_cast<int64_t>(f * length.count())));
    const Tree after = Snapshot("out");
    for (const auto& [name, bytes] : after)
      ASSERT_FALSE(Leftover(name)) << "trial " << trials << ": " << name << " left behind";
    ASSERT_TRUE(after == old_model || after == new_model)
        << "trial " << trials << ": a mix of the old and the new model";
    ++outcomes[after == new_model];
  }
  std::printf("%d trials (a run: %lld us): %d old, %d new\n", trials, static_cast<long long>(length.count()),
              outcomes[0], outcomes[1]);
}

TEST_F(OutputCli, SigintIntoANewDirectoryLeavesNoDirectoryOrTheWholeModel) {
  MakeModel(24);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Shell(Merge("new")), 0);
  const auto length = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  const Tree new_model = Snapshot("new");
  std::mt19937 random(11);
  for (int trial = 0; trial < 40; ++trial) {
    fs::remove_all(dir_ / "out");
    const double f = std::uniform_real_distribution<double>(0, 1.1)(random);
    Interrupt(Merge("out"), trial % 2 ? SIGINT : SIGTERM,
              std::chrono::microseconds(static_cast<int64_t>(f * length.count())));
    if (!fs::exists(dir_ / "out")) continue;
    ASSERT_TRUE(Snapshot("out") == new_model) << "trial " << trial << ": neither no directory nor the whole model";
  }
}

TEST_F(OutputCli, AfterSigkillTheNextRunLeavesExactlyTheNewModel) {
  MakeModel(24);
  ASSERT_EQ(Shell(Merge("old") + " --dtype f16"), 0);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Shell(Merge("new")), 0);
  const auto length = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  const Tree new_model = Snapshot("new");
  std::mt19937 random(13);
  int left = 0;
  for (int trial = 0; trial < 30; ++trial) {
    fs::remove_all(dir_ / "out");
    fs::copy(dir_ / "old", dir_ / "out");
    const double f = std::uniform_real_distribution<double>(0.3, 1.1)(random);
    Interrupt(Merge("out") + " --force", SIGKILL, std::chrono::microseconds(static_cast<int64_t>(f * length.count())));
    for (const auto& [name, bytes] : Snapshot("out")) left += Leftover(name);
    ASSERT_EQ(Shell(Merge("out") + " --force"), 0);
    ASSERT_TRUE(Snapshot("out") == new_model) << "trial " << trial << ": the re-run kept what the killed run left";
  }
  std::printf("%d files the killed runs left, all removed or completed by the re-runs\n", left);
}

TEST_F(OutputCli, ABaseOf300ShardsMergesUnderALimitOf128OpenFiles) {
  MakeModel(300);
  for (const char* threads : {"", " --threads 1", " --threads 2"}) {
    fs::remove_all(dir_ / "out");
    ASSERT_EQ(Shell("ulimit -n 128 && " + Merge("out") + threads), 0) << threads;
    EXPECT_EQ(Snapshot("out").size(), 302u);
  }
  ASSERT_EQ(Shell(Merge("free")), 0);
  EXPECT_TRUE(Snapshot("out") == Snapshot("free"));
}

// 3,000 shards under the default limit of 1,024 descriptors, which once failed with "Too many open files" while
// every shard was held open. About 3.6 s of CPU per merge here (tiny shards).
TEST_F(OutputCli, ABaseOf3000ShardsMergesUnderTheDefaultLimitOf1024OpenFiles) {
  MakeModel(3000);
  ASSERT_EQ(Shell("ulimit -n 1024 && " + Merge("out")), 0);
  EXPECT_EQ(Snapshot("out").size(), 3002u);
  ASSERT_EQ(Shell(Merge("free")), 0);
  EXPECT_TRUE(Snapshot("out") == Snapshot("free"));
}

}  // namespace
}  // namespace pb::testing
#endif  // PB_CLI_PATH
