// kohya-ss module names: which prefix a module gets, as sd-scripts (networks/lora.py) writes them and A1111,
// ComfyUI and diffusers' kohya converter (_convert_non_diffusers_lora_to_diffusers) read them:
//   a diffusion UNet's modules      lora_unet_<path>   (down_blocks_0_attentions_0_..._attn1_to_q)
//   the text encoder (SD 1.x/2.x)   lora_te_<path>     (text_model_encoder_layers_0_self_attn_q_proj)
//   SDXL's two text encoders        lora_te1_<path> and lora_te2_<path>
//   anything else (an LLM)          lora_te_<path>, the table's write_prefix
// <path> is the module path inside its component with '.' replaced by '_'. A module is put in a component by
// the prefix diffusers gives it in a pipeline's LoRA file (unet., text_encoder., text_encoder_2.), which is
// dropped, or else by its first path segment: a UNet2DConditionModel's top-level blocks (down_blocks, mid_block,
// up_blocks, conv_in, ...) or a CLIPTextModel's text_model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pb::adapter {

// True when the modules hold SDXL's second text encoder (text_encoder_2.): the first one is then lora_te1_.
bool HasSecondTextEncoder(const std::vector<std::string>& module_paths);

// The kohya base name of a module (the key without .lora_down.weight and the like).
std::string KohyaBaseName(std::string_view module_path, bool second_text_encoder, std::string_view default_prefix);

}  // namespace pb::adapter
