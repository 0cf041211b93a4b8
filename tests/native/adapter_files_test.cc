// Which files of an adapter directory are read (app/adapter_files.h): the rule both CLIs and the JS API share.
#include "app/adapter_files.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pb::app {
namespace {

Result<AdapterFiles> Choose(std::vector<std::string> files) { return ChooseAdapterFiles("dir", files); }

TEST(AdapterFiles, UsualNamesWinInOrderOverOtherSafetensors) {
  auto peft = Choose({"z.safetensors", "adapters.safetensors", "adapter_model.safetensors", "adapter_config.json"});
  ASSERT_TRUE(peft.ok());
  EXPECT_EQ(peft->weights, "adapter_model.safetensors");
  EXPECT_EQ(peft->config, "adapter_config.json");
  auto mlx = Choose({"pytorch_lora_weights.safetensors", "adapters.safetensors"});
  ASSERT_TRUE(mlx.ok());
  EXPECT_EQ(mlx->weights, "adapters.safetensors");
  EXPECT_FALSE(mlx->config.has_value());
}

TEST(AdapterFiles, TheOnlySafetensorsFileOtherwise) {
  auto only = Choose({"README.md", "my_lora.safetensors", "adapter_model.bin"});
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->weights, "my_lora.safetensors");
  // ".safetensors" alone is no file name with that suffix.
  auto bare = Choose({".safetensors", "a.safetensors"});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->weights, "a.safetensors");
}

TEST(AdapterFiles, SeveralUnusualNamesAreAmbiguous) {
  auto r = Choose({"a.safetensors", "b.safetensors"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(r.error().message.find("`dir` holds several .safetensors files"), std::string::npos);
}

TEST(AdapterFiles, TheOnlyGgufFileWhenThereIsNoSafetensors) {
  auto gguf = Choose({"README.md", "Lora-F16-LoRA.gguf", "adapter_config.json"});
  ASSERT_TRUE(gguf.ok());
  EXPECT_EQ(gguf->weights, "Lora-F16-LoRA.gguf");
  auto both = Choose({"adapter_model.safetensors", "x.gguf"});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->weights, "adapter_model.safetensors");  // the PEFT adapter beside its conversion wins
  auto several = Choose({"a.gguf", "b.gguf"});
  ASSERT_FALSE(several.ok());
  EXPECT_EQ(several.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(several.error().message.find("several .gguf files"), std::string::npos);
  auto bare = Choose({".gguf"});
  EXPECT_FALSE(bare.ok());
}

TEST(AdapterFiles, PickleOrNothing) {
  auto pickle = Choose({"adapter_model.bin", "adapter_config.json"});
  ASSERT_FALSE(pickle.ok());
  EXPECT_NE(pickle.error().message.find("adapter_model.bin"), std::string::npos);
  auto none = Choose({"adapter_config.json"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::IoError);
  EXPECT_EQ(none.error().message,
            "`dir` holds no adapter_model.safetensors (or other .safetensors file, or one .gguf file)");
}

TEST(AdapterFiles, APickledFileNamedDirectlyIsRefused) {
  EXPECT_FALSE(CheckAdapterWeightsPath("x/adapter_model.bin").ok());
  EXPECT_FALSE(CheckAdapterWeightsPath("x.pt").ok());
  EXPECT_FALSE(CheckAdapterWeightsPath("x.pth").ok());
  EXPECT_TRUE(CheckAdapterWeightsPath("x/adapter_model.safetensors").ok());
}

}  // namespace
}  // namespace pb::app
