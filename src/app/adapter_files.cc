#include "app/adapter_files.h"

#include <algorithm>
#include <vector>

#include "adapter/adapter_io.h"

namespace pb::app {

namespace {

constexpr std::string_view kPreferredWeights[] = {"adapter_model.safetensors", "adapters.safetensors",
                                                  "pytorch_lora_weights.safetensors"};

bool Listed(std::span<const std::string> files, std::string_view name) {
  return std::find(files.begin(), files.end(), name) != files.end();
}

// The names ending in `suffix` (and longer than it).
std::vector<std::string> WithSuffix(std::span<const std::string> files, std::string_view suffix) {
  std::vector<std::string> out;
  for (const std::string& name : files)
    if (name.size() > suffix.size() && name.ends_with(suffix)) out.push_back(name);
  return out;
}

}  // namespace

Result<AdapterFiles> ChooseAdapterFiles(std::string_view dir, std::span<const std::string> files) {
  AdapterFiles chosen;
  if (Listed(files, kAdapterConfigName)) chosen.config = std::string(kAdapterConfigName);
  for (std::string_view name : kPreferredWeights) {
    if (Listed(files, name)) {
      chosen.weights = std::string(name);
      return chosen;
    }
  }
  const std::vector<std::string> safetensors = WithSuffix(files, ".safetensors");
  if (safetensors.size() == 1) {
    chosen.weights = safetensors[0];
    return chosen;
  }
  const std::string shown(dir);
  if (safetensors.empty()) {
    // No safetensors weights: a llama.cpp LoRA adapter (.gguf), when the directory holds exactly one.
    const std::vector<std::string> ggufs = WithSuffix(files, ".gguf");
    if (ggufs.size() == 1) {
      chosen.weights = ggufs[0];
      return chosen;
    }
    if (ggufs.size() > 1)
      return MakeError(ErrorCode::InvalidArgument,
                       "`" + shown + "` holds several .gguf files and no .safetensors adapter; pass the file itself");
  }
  if (safetensors.size() > 1)
    return MakeError(ErrorCode::InvalidArgument, "`" + shown +
                                                     "` holds several .safetensors files and none has an "
                                                     "adapter's usual name; pass the file itself");
  if (Listed(files, "adapter_model.bin")) return adapter::PickleAdapterError("adapter_model.bin");
  return MakeError(
      ErrorCode::IoError,
      "`" + shown + "` holds no adapter_model.safetensors (or other .safetensors file, or one .gguf file)");
}

Status CheckAdapterWeightsPath(std::string_view path) {
  if (path.ends_with(".bin") || path.ends_with(".pt") || path.ends_with(".pth"))
    return adapter::PickleAdapterError(std::string(path));
  return Status::Ok();
}

}  // namespace pb::app
