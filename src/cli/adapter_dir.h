// Finding an adapter's files in a directory (shared by adapter-info, translate, merge).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "adapter/tensor_fetch.h"
#include "cli/file_io.h"
#include "gguf/gguf_reader.h"

namespace pb::cli {

// The weights file is opened, not read: its header and the few tiny tensors readers inspect are read at once,
// every other tensor with pread when a consumer asks for it (SupplyAdapterBytes), so an adapter of any size is
// handled in memory bounded by its largest module.
struct AdapterDir {
  std::string weights_path;
  std::string weights_name;            // the weights file's name ("" for weights_path's last segment)
  std::optional<InputFile> weights;    // a local adapter's weights, read with pread...
  std::vector<uint8_t> weights_bytes;  // ...or a remote one's, fetched whole (bounded by PB_HTTP_MAX_ADAPTER_BYTES)
  Header header;
  std::vector<uint8_t> inline_bytes;   // the bytes of adapter::InlineTensorRanges(header), concatenated
  std::optional<gguf::GgufFile> gguf;  // a .gguf adapter's header (then `header` is empty), by its magic
  std::optional<std::string> config;
  std::optional<std::string> base_config;
};

std::string Join(const std::string& dir, const std::string& name);
Result<std::string> ReadText(const std::string& path);
// An adapter directory (or a .safetensors file with its directory's adapter_config.json): the weights file
// is adapter_model.safetensors, adapters.safetensors, pytorch_lora_weights.safetensors or the only
// .safetensors file; a lone adapter_model.bin is refused (pickle).
// A remote `path` (http(s)://, hf://) is read by LoadRemoteAdapter.
Result<AdapterDir> LoadAdapterDir(const std::string& path, const std::optional<std::string>& base_config_path);
// As LoadAdapterDir, without reading the weights file's header: the files found, opened, the configs read (a job
// reads the header itself: app/translate_job.h).
Result<AdapterDir> OpenAdapterDir(const std::string& path, const std::optional<std::string>& base_config_path);
// A Hub repo or folder (its listing chosen from as a local directory is), or the URL of the weights file with
// adapter_config.json beside it (if there is one): the configs and the weights are fetched whole, the header not
// yet read (cli/remote_adapter.cc).
Result<AdapterDir> OpenRemoteAdapter(const std::string& address, const std::optional<std::string>& base_config_path);
// The weights file's name (messages): dir.weights_name, else weights_path's last segment.
std::string WeightsNameOf(const AdapterDir& dir);
// Bytes of the weights file, wherever they are.
Status ReadWeightsAt(const AdapterDir& dir, uint64_t offset, std::span<uint8_t> out);
// The header and the inline tensors' bytes of dir.weights (or dir.weights_bytes), after the configs.
Status ReadAdapterHeader(AdapterDir& dir);
adapter::AdapterSource SourceOf(const AdapterDir& dir);
// Reads what `consumer` asks for from the adapter's weights file until it asks for nothing more; `on_read`, when
// given, learns the count of bytes supplied so far after each piece (the progress line).
Status SupplyAdapterBytes(adapter::AdapterBytesConsumer& consumer, const AdapterDir& dir,
                          const std::function<void(uint64_t)>& on_read = {});

}  // namespace pb::cli
