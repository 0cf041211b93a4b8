// kohya module names by component (adapter/kohya_names.h), in the forms sd-scripts writes and diffusers' kohya
// converter reads (lora_unet_, lora_te_, lora_te1_/lora_te2_).
#include <gtest/gtest.h>

#include "adapter/kohya_names.h"

namespace pb::adapter {
namespace {

TEST(KohyaNames, UnetModulesGetLoraUnet) {
  EXPECT_EQ(KohyaBaseName("down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q", false, "lora_te_"),
            "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q");
  EXPECT_EQ(KohyaBaseName("mid_block.attentions.0.proj_in", false, "lora_te_"),
            "lora_unet_mid_block_attentions_0_proj_in");
  EXPECT_EQ(KohyaBaseName("up_blocks.1.resnets.0.conv1", false, "lora_te_"), "lora_unet_up_blocks_1_resnets_0_conv1");
  EXPECT_EQ(KohyaBaseName("time_embedding.linear_1", false, "lora_te_"), "lora_unet_time_embedding_linear_1");
  // diffusers' pipeline prefix is dropped.
  EXPECT_EQ(KohyaBaseName("unet.down_blocks.1.attentions.0.proj_out", false, "lora_te_"),
            "lora_unet_down_blocks_1_attentions_0_proj_out");
}

TEST(KohyaNames, TextEncoders) {
  EXPECT_EQ(KohyaBaseName("text_model.encoder.layers.0.self_attn.q_proj", false, "lora_te_"),
            "lora_te_text_model_encoder_layers_0_self_attn_q_proj");
  EXPECT_EQ(KohyaBaseName("text_encoder.text_model.encoder.layers.0.mlp.fc1", false, "lora_te_"),
            "lora_te_text_model_encoder_layers_0_mlp_fc1");
  // SDXL: two text encoders, lora_te1_ and lora_te2_.
  std::vector<std::string> sdxl = {"text_encoder.text_model.encoder.layers.0.self_attn.q_proj",
                                   "text_encoder_2.text_model.encoder.layers.0.self_attn.q_proj"};
  ASSERT_TRUE(HasSecondTextEncoder(sdxl));
  EXPECT_EQ(KohyaBaseName(sdxl[0], true, "lora_te_"), "lora_te1_text_model_encoder_layers_0_self_attn_q_proj");
  EXPECT_EQ(KohyaBaseName(sdxl[1], true, "lora_te_"), "lora_te2_text_model_encoder_layers_0_self_attn_q_proj");
  EXPECT_FALSE(HasSecondTextEncoder({sdxl[0]}));
}

TEST(KohyaNames, OtherModelsKeepTheDefaultPrefix) {
  EXPECT_EQ(KohyaBaseName("model.layers.3.self_attn.q_proj", false, "lora_te_"),
            "lora_te_model_layers_3_self_attn_q_proj");
  EXPECT_EQ(KohyaBaseName("down_blocks_x.a", false, "lora_te_"),
            "lora_te_down_blocks_x_a");  // first segment must match
}

}  // namespace
}  // namespace pb::adapter
