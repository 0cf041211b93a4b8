// Which of the base directory's files a merge copies into its output (app/base_extras.h), and the warning for
// a base without config.json; the same rule through the JSON form the npm CLI calls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "app/base_extras.h"
#include "app/output_policy_json.h"

namespace pb::app {
namespace {

ExtraFilesRequest Request(std::vector<BaseEntry> listing) {
  ExtraFilesRequest r;
  r.base_path = "models/llama";
  r.base_is_directory = true;
  r.listing = std::move(listing);
  r.written = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json",
               "config.json"};
  r.writes_config = true;
  return r;
}

TEST(BaseExtras, CopiesEveryFileButWeightsInByteOrder) {
  auto r = Request({{"tokenizer_config.json", EntryKind::kFile},
                    {"tokenizer.json", EntryKind::kFile},
                    {"special_tokens_map.json", EntryKind::kFile},
                    {"tokenizer.model", EntryKind::kFile},
                    {"generation_config.json", EntryKind::kFile},
                    {"chat_template.jinja", EntryKind::kFile},
                    {"README.md", EntryKind::kFile},
                    {"config.json", EntryKind::kFile},
                    {"model-00001-of-00002.safetensors", EntryKind::kFile},
                    {"model-00002-of-00002.safetensors", EntryKind::kFile},
                    {"model.safetensors.index.json", EntryKind::kFile}});
  ExtraFiles extra = PlanExtraFiles(r);
  EXPECT_EQ(extra.copy, (std::vector<std::string>{"README.md", "chat_template.jinja", "generation_config.json",
                                                  "special_tokens_map.json", "tokenizer.json", "tokenizer.model",
                                                  "tokenizer_config.json"}));
  EXPECT_EQ(extra.warnings, "");
}

TEST(BaseExtras, SkipsWeightsOfEveryFormatAdapterFilesHiddenEntriesAndDirectories) {
  auto r = Request({{"pytorch_model.bin", EntryKind::kFile},
                    {"pytorch_model.bin.index.json", EntryKind::kFile},
                    {"consolidated.pth", EntryKind::kFile},
                    {"training_args.pt", EntryKind::kFile},
                    {"v1-5.ckpt", EntryKind::kFile},
                    {"model-q4.gguf", EntryKind::kFile},
                    {"tf_model.h5", EntryKind::kFile},
                    {"flax_model.msgpack", EntryKind::kFile},
                    {"model.onnx", EntryKind::kFile},
                    {"adapter_config.json", EntryKind::kFile},
                    {"adapter_model.safetensors", EntryKind::kFile},
                    {".gitattributes", EntryKind::kFile},
                    {".cache", EntryKind::kDirectory},
                    {"1_Pooling", EntryKind::kDirectory},
                    {"dangling", EntryKind::kOther},
                    {"merges.txt", EntryKind::kFile},
                    {"vocab.json", EntryKind::kFile}});
  EXPECT_EQ(PlanExtraFiles(r).copy, (std::vector<std::string>{"merges.txt", "vocab.json"}));
}

TEST(BaseExtras, OnlyPlainNamesOfAGivenListing) {
  auto r = Request({{"../secrets.txt", EntryKind::kFile},
                    {"sub/tokenizer.json", EntryKind::kFile},
                    {"a\\b.txt", EntryKind::kFile},
                    {std::string("nul\0.txt", 7), EntryKind::kFile},
                    {"tokenizer.json", EntryKind::kFile}});
  EXPECT_EQ(PlanExtraFiles(r).copy, (std::vector<std::string>{"tokenizer.json"}));
}

TEST(BaseExtras, WeightFileNames) {
  for (const char* name : {"model.safetensors", "x.index.json", "a.bin", "a.pt", "a.pth", "a.ckpt", "a.gguf", "a.h5",
                           "a.msgpack", "adapter_config.json", "adapter_model.bin"})
    EXPECT_TRUE(IsWeightFile(name)) << name;
  for (const char* name : {"tokenizer.json", "tokenizer.model", "config.json", ".bin", "binary.txt", "README.md"})
    EXPECT_FALSE(IsWeightFile(name)) << name;
}

TEST(BaseExtras, NothingWithNoCopyExtraOrABaseFile) {
  auto r = Request({{"tokenizer.json", EntryKind::kFile}});
  r.copy_extra = false;
  EXPECT_TRUE(PlanExtraFiles(r).copy.empty());
  r.copy_extra = true;
  r.base_is_directory = false;  // --base models/llama/model.safetensors: its directory need not be the model's
  EXPECT_TRUE(PlanExtraFiles(r).copy.empty());
}

TEST(BaseExtras, WarnsWithoutConfigJsonEvenWithNoCopyExtra) {
  auto r = Request({{"tokenizer.json", EntryKind::kFile}});
  r.writes_config = false;
  const std::string warning =
      "warning: the base `models/llama` has no config.json beside its weights, so the merged folder has none and will "
      "not load as a model; pass --base-config FILE\n";
  EXPECT_EQ(PlanExtraFiles(r).warnings, warning);
  r.copy_extra = false;
  EXPECT_EQ(PlanExtraFiles(r).warnings, warning);
}

TEST(BaseExtras, JsonFormMatches) {
  nlohmann::json request = {{"basePath", "b"},
                            {"baseIsDirectory", true},
                            {"listing",
                             {{{"name", "tokenizer.json"}, {"kind", "file"}},
                              {{"name", "sub"}, {"kind", "directory"}},
                              {{"name", "model.safetensors"}, {"kind", "file"}},
                              {{"name", "generation_config.json"}, {"kind", "file"}}}},
                            {"written", {"model.safetensors"}},
                            {"writesConfig", false},
                            {"copyExtra", true}};
  auto out = PlanExtraFilesJson(request.dump());
  ASSERT_TRUE(out.ok());
  auto j = nlohmann::json::parse(out.value());
  EXPECT_EQ(j["copy"], nlohmann::json({"generation_config.json", "tokenizer.json"}));
  EXPECT_NE(j["warnings"].get<std::string>().find("`b` has no config.json"), std::string::npos);
}

}  // namespace
}  // namespace pb::app
