// Finding an adapter's files in a directory (shared by adapter-info, translate, merge).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"

namespace pb::cli {

struct AdapterDir {
  std::string weights_path;
  std::vector<uint8_t> weights;
  std::optional<std::string> config;
  std::optional<std::string> base_config;
};

std::string Join(const std::string& dir, const std::string& name);
Result<std::string> ReadText(const std::string& path);
// An adapter directory (or a .safetensors file with its directory's adapter_config.json): the weights file
// is adapter_model.safetensors, adapters.safetensors, pytorch_lora_weights.safetensors or the only
// .safetensors file; a lone adapter_model.bin is refused (pickle).
Result<AdapterDir> LoadAdapterDir(const std::string& path, const std::optional<std::string>& base_config_path);
adapter::AdapterSource SourceOf(const AdapterDir& dir);

}  // namespace pb::cli
