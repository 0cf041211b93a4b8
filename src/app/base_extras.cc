#include "app/base_extras.h"

#include <algorithm>
#include <array>

namespace pb::app {

bool IsWeightFile(std::string_view name) {
  constexpr std::array<std::string_view, 11> kSuffixes = {
      ".safetensors", ".index.json", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".pkl"};
  for (auto s : kSuffixes)
    if (name.size() > s.size() && name.ends_with(s)) return true;
  return name == "adapter_config.json" || name.starts_with("adapter_model.");
}

ExtraFiles PlanExtraFiles(const ExtraFilesRequest& r) {
  ExtraFiles out;
  if (!r.writes_config)
    out.warnings += "warning: the base `" + r.base_path +
                    "` has no config.json beside its weights, so the merged folder has none and will not load as "
                    "a model; pass --base-config FILE\n";
  if (!r.copy_extra || !r.base_is_directory) return out;
  for (const auto& e : r.listing) {
    if (e.kind != EntryKind::kFile || e.name.empty() || e.name[0] == '.' || IsWeightFile(e.name)) continue;
    // A listing the caller gave (the JS API's base.files) may hold paths: only the directory's own names are its files.
    if (e.name.find_first_of("/\\") != std::string::npos || e.name.find('\0') != std::string::npos) continue;
    if (std::find(r.written.begin(), r.written.end(), e.name) != r.written.end()) continue;
    out.copy.push_back(e.name);
  }
  std::sort(out.copy.begin(), out.copy.end());
  return out;
}

}  // namespace pb::app
