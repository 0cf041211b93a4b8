#include "adapter/kohya_names.h"

#include <array>

namespace pb::adapter {
namespace {

// diffusers' component prefixes in a pipeline's LoRA file, longest first (text_encoder_2. before text_encoder.).
struct Component {
  std::string_view module_prefix;
  std::string_view kohya_prefix;  // with one text encoder
  std::string_view kohya_prefix_sdxl;
};
constexpr std::array<Component, 3> kComponents = {{
    {"text_encoder_2.", "lora_te2_", "lora_te2_"},
    {"text_encoder.", "lora_te_", "lora_te1_"},
    {"unet.", "lora_unet_", "lora_unet_"},
}};

// The top-level modules of diffusers' UNet2DConditionModel that hold weights.
constexpr std::array<std::string_view, 10> kUnetBlocks = {
    "down_blocks",   "mid_block",      "up_blocks",     "conv_in",         "conv_out",
    "conv_norm_out", "time_embedding", "add_embedding", "class_embedding", "encoder_hid_proj"};

std::string Underscored(std::string_view prefix, std::string_view path) {
  std::string s(prefix);
  for (char c : path) s += c == '.' ? '_' : c;
  return s;
}

}  // namespace

bool HasSecondTextEncoder(const std::vector<std::string>& module_paths) {
  for (const auto& p : module_paths)
    if (p.starts_with(kComponents[0].module_prefix)) return true;
  return false;
}

std::string KohyaBaseName(std::string_view path, bool second_text_encoder, std::string_view default_prefix) {
  for (const auto& c : kComponents)
    if (path.starts_with(c.module_prefix))
      return Underscored(second_text_encoder ? c.kohya_prefix_sdxl : c.kohya_prefix,
                         path.substr(c.module_prefix.size()));
  std::string_view first = path.substr(0, path.find('.'));
  for (auto block : kUnetBlocks)
    if (first == block) return Underscored("lora_unet_", path);
  if (first == "text_model") return Underscored(second_text_encoder ? "lora_te1_" : "lora_te_", path);
  return Underscored(default_prefix, path);
}

}  // namespace pb::adapter
