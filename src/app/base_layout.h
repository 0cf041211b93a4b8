// Which file of a model directory a command reads first: the index of a sharded model, else the single file.
// Sans-I/O, as app/adapter_files.h: the edge lists the directory (a local folder, a Hub repo's tree), this chooses.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pb::app {

inline constexpr std::string_view kSingleModelName = "model.safetensors";

// model.safetensors.index.json when listed (the shards are then the index's), else model.safetensors; IoError
// naming `dir` when neither is listed.
Result<std::string> ChooseBaseFile(std::string_view dir, std::span<const std::string> files);

// True for the name of a sharded model's index (model.safetensors.index.json, and the same file under another
// model name, as diffusers' diffusion_pytorch_model.safetensors.index.json).
bool IsModelIndexName(std::string_view name);

}  // namespace pb::app
