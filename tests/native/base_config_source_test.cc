// translate --to gguf's base config, found as convert_lora_to_gguf.py finds it (app/base_config_source.h,
// docs/gguf.md): the rule itself, and the native CLI following it (tests/js/gguf-base-config.test.mjs runs both CLIs,
// the Hub case and the JS API).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/base_config_source.h"
#ifdef PB_CLI_PATH
#include "cli_runner.h"
#endif

namespace pb::app {
namespace {

namespace fs = std::filesystem;
using Kind = BaseConfigChoice::Kind;

BaseConfigFacts Named(const std::string& name, bool local = false, bool remote = false) {
  BaseConfigFacts f;
  f.base = AdapterBaseModel{name, std::nullopt};
  f.local_config_exists = local;
  f.adapter_remote = remote;
  f.endpoint = "http://hub.test";
  return f;
}

TEST(BaseConfigSource, ReadsBaseModelNameAndRevisionFromTheAdapterConfig) {
  auto b = AdapterBaseModelOf(R"({"base_model_name_or_path": "owner/model", "revision": "v2", "r": 8})");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->name, "owner/model");
  EXPECT_EQ(b->revision, "v2");
  EXPECT_FALSE(AdapterBaseModelOf(R"({"base_model_name_or_path": null})"));
  EXPECT_FALSE(AdapterBaseModelOf(R"({"base_model_name_or_path": ""})"));
  EXPECT_FALSE(AdapterBaseModelOf("not json"));
  EXPECT_EQ(LocalBaseConfigPath("/m/llama/"), "/m/llama/config.json");
  EXPECT_EQ(LocalBaseConfigPath("llama"), "llama/config.json");
}

TEST(BaseConfigSource, TheFlagWinsLocalOrRemote) {
  BaseConfigFacts f = Named("owner/model", true, true);
  f.flag = "cfg.json";
  auto c = ChooseBaseConfig(f);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, Kind::kLocal);
  EXPECT_EQ(c->path, "cfg.json");
  EXPECT_EQ(c->note, "");  // the user named it: nothing to announce
  f.flag = "hf://other/base@dev";
  c = ChooseBaseConfig(f);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, Kind::kRemote);
  EXPECT_EQ(c->remote.url, "http://hub.test/other/base/resolve/dev/config.json");
  f.flag = "hf://other/base/sub/config.json";
  c = ChooseBaseConfig(f);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->remote.url, "http://hub.test/other/base/resolve/main/sub/config.json");
  f.flag = "hf://only-owner";
  EXPECT_FALSE(ChooseBaseConfig(f).ok());
}

TEST(BaseConfigSource, ALocalFolderIsUsedAndSaidBeforeTheHub) {
  auto c = ChooseBaseConfig(Named("/models/llama", true, true));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, Kind::kLocal);
  EXPECT_EQ(c->path, "/models/llama/config.json");
  EXPECT_EQ(c->note, "base config: /models/llama/config.json (the adapter's base_model_name_or_path)");
}

TEST(BaseConfigSource, TheHubRepoOnlyForAnAdapterReadFromTheHub) {
  BaseConfigFacts f = Named("meta-llama/Llama-3.2-1B", false, true);
  f.base->revision = "refs/pr/1";
  auto c = ChooseBaseConfig(f);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, Kind::kRemote);
  EXPECT_EQ(c->remote.url, "http://hub.test/meta-llama/Llama-3.2-1B/resolve/refs%2Fpr%2F1/config.json");
  EXPECT_NE(c->note.find("on the Hub"), std::string::npos);
  // A local adapter: no request; the hint says what to pass.
  c = ChooseBaseConfig(Named("meta-llama/Llama-3.2-1B"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, Kind::kNone);
  EXPECT_EQ(c->hint,
            "the adapter's base_model_name_or_path `meta-llama/Llama-3.2-1B` is not a local folder with config.json; "
            "pass --base-config hf://meta-llama/Llama-3.2-1B (its config.json, read from the Hub) or a local copy's "
            "config.json");
  // A path (or a legacy one-word id) is never fetched, even for a Hub adapter.
  for (const char* name : {"/home/me/llama", "./llama", "gpt2", "a/b/c"}) {
    c = ChooseBaseConfig(Named(name, false, true));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->kind, Kind::kNone) << name;
    EXPECT_EQ(c->hint, std::string("the adapter's base_model_name_or_path `") + name +
                           "` is not a local folder with config.json; pass --base-config BASE/config.json");
  }
  BaseConfigFacts none;
  c = ChooseBaseConfig(none);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->hint, "adapter_config.json names no base_model_name_or_path: pass --base-config BASE/config.json");
}

#ifdef PB_CLI_PATH  // the native build only: the WASM test suite has no CLI to run
// The native CLI: a LLaMA adapter (q/k rows permuted by head) whose base_model_name_or_path is a local folder.
TEST(BaseConfigSourceCli, TranslateToGgufUsesTheLocalBaseFolder) {
  const fs::path dir = fs::temp_directory_path() / ("pb_base_config_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path corpus = fs::path(PB_SOURCE_DIR) / "tests" / "golden" / "corpus" / "arch_llama";
  fs::create_directories(dir / "adapter");
  fs::create_directories(dir / "base");
  fs::copy_file(corpus / "adapter" / "adapter_model.safetensors", dir / "adapter" / "adapter_model.safetensors");
  fs::copy_file(corpus / "base" / "config.json", dir / "base" / "config.json");
  std::stringstream config;
  config << std::ifstream(corpus / "adapter" / "adapter_config.json").rdbuf();
  std::string text = config.str();
  const std::string key = "\"base_model_name_or_path\": \"";
  const size_t at = text.find(key) + key.size();
  text.replace(at, text.find('"', at) - at, (dir / "base").string());
  testing::WriteFile(dir / "adapter" / "adapter_config.json", text);

  auto r = testing::RunCli("translate " + (dir / "adapter").string() + " " + (dir / "out.gguf").string() + " --to gguf",
                           true);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("base config: " + (dir / "base" / "config.json").string() +
                       " (the adapter's base_model_name_or_path)"),
            std::string::npos)
      << r.out;
  auto flagged = testing::RunCli("translate " + (dir / "adapter").string() + " " + (dir / "flagged.gguf").string() +
                                 " --to gguf -q --base-config " + (corpus / "base" / "config.json").string());
  EXPECT_EQ(flagged.status, 0);
  std::stringstream a, b;
  a << std::ifstream(dir / "out.gguf", std::ios::binary).rdbuf();
  b << std::ifstream(dir / "flagged.gguf", std::ios::binary).rdbuf();
  EXPECT_FALSE(a.str().empty());
  EXPECT_EQ(a.str(), b.str());
  fs::remove_all(dir);
}
#endif

}  // namespace
}  // namespace pb::app
