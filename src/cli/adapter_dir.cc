#include "cli/adapter_dir.h"

#include <dirent.h>

#include <algorithm>

#include "cli/file_io.h"

namespace pb::cli {

namespace {

std::vector<std::string> ListFiles(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > suffix.size() && name.ends_with(suffix) && IsRegularFile(Join(dir, name))) names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

Result<std::string> ReadText(const std::string& path) {
  auto bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.error();
  return std::string(bytes->begin(), bytes->end());
}

// An adapter directory (or a .safetensors file with its directory's adapter_config.json).
Result<AdapterDir> LoadAdapterDir(const std::string& path, const std::optional<std::string>& base_config_path) {
  AdapterDir dir;
  std::string folder = path;
  if (IsDirectory(path)) {
    for (const char* name : {"adapter_model.safetensors", "adapters.safetensors", "pytorch_lora_weights.safetensors"}) {
      if (IsRegularFile(Join(path, name))) {
        dir.weights_path = Join(path, name);
        break;
      }
    }
    if (dir.weights_path.empty()) {
      auto files = ListFiles(path, ".safetensors");
      if (files.size() == 1) dir.weights_path = Join(path, files[0]);
      else if (files.size() > 1)
        return MakeError(ErrorCode::InvalidArgument, "`" + path + "` holds several .safetensors files and none has an "
                                                     "adapter's usual name; pass the file itself");
    }
    if (dir.weights_path.empty()) {
      if (IsRegularFile(Join(path, "adapter_model.bin"))) return adapter::PickleAdapterError("adapter_model.bin");
      return MakeError(ErrorCode::IoError, "`" + path + "` holds no adapter_model.safetensors (or other .safetensors file)");
    }
  } else {
    if (path.ends_with(".bin") || path.ends_with(".pt") || path.ends_with(".pth"))
      return adapter::PickleAdapterError(path);
    dir.weights_path = path;
    size_t slash = path.rfind('/');
    folder = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  auto weights = ReadWholeFile(dir.weights_path);
  if (!weights.ok()) return weights.error();
  dir.weights = std::move(weights.value());
  if (std::string config = Join(folder, "adapter_config.json"); IsRegularFile(config)) {
    auto text = ReadText(config);
    if (!text.ok()) return text.error();
    dir.config = std::move(text.value());
  }
  if (base_config_path) {
    auto text = ReadText(*base_config_path);
    if (!text.ok()) return text.error();
    dir.base_config = std::move(text.value());
  }
  return dir;
}

adapter::AdapterSource SourceOf(const AdapterDir& dir) {
  return {dir.weights_path.substr(dir.weights_path.rfind('/') == std::string::npos ? 0 : dir.weights_path.rfind('/') + 1),
          dir.weights, dir.config, dir.base_config};
}

}  // namespace pb::cli
