// Finding an adapter's files in a directory (shared by adapter-info, translate, merge).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "adapter/tensor_fetch.h"
#include "cli/file_io.h"

namespace pb::cli {

// The weights file is opened, not read: its header and the few tiny tensors readers inspect are read at once,
// every other tensor with pread when a consumer asks for it (SupplyAdapterBytes), so an adapter of any size is
// handled in memory bounded by its largest module.
struct AdapterDir {
  std::string weights_path;
  std::optional<InputFile> weights;
  Header header;
  std::vector<uint8_t> inline_bytes;  // the bytes of adapter::InlineTensorRanges(header), concatenated
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
// Reads what `consumer` asks for from the adapter's weights file until it asks for nothing more; `on_read`, when
// given, learns the count of bytes supplied so far after each piece (the progress line).
Status SupplyAdapterBytes(adapter::AdapterBytesConsumer& consumer, const AdapterDir& dir,
                          const std::function<void(uint64_t)>& on_read = {});

}  // namespace pb::cli
