// Which files of an adapter directory peft-bridge reads. Sans-I/O: the edge lists the directory (a local folder,
// a Hub repo's tree), this chooses; the native CLI, the npm CLI and the JS API all ask here.
//
// The weights file is the first present of adapter_model.safetensors (PEFT), adapters.safetensors (mlx-lm) and
// pytorch_lora_weights.safetensors (diffusers), else the only .safetensors file; several other .safetensors
// files are ambiguous (InvalidArgument); with no .safetensors file, the only .gguf file (a llama.cpp LoRA adapter;
// several are ambiguous); none, with adapter_model.bin beside, is a pickled adapter (refused); none at all is
// IoError. The config is adapter_config.json when present.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/result.h"

namespace pb::app {

inline constexpr std::string_view kAdapterConfigName = "adapter_config.json";

struct AdapterFiles {
  std::string weights;                // a name from the listing
  std::optional<std::string> config;  // kAdapterConfigName when listed
};

// `dir` names the directory in messages; `files` are the names of the regular files in it (links followed),
// in any order.
Result<AdapterFiles> ChooseAdapterFiles(std::string_view dir, std::span<const std::string> files);

// A weights file named directly: a pickled one (.bin, .pt, .pth) is refused; anything else is read as
// safetensors (or GGUF, by its magic), with adapter_config.json from its directory.
Status CheckAdapterWeightsPath(std::string_view path);

}  // namespace pb::app
