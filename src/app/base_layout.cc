#include "app/base_layout.h"

#include <algorithm>

#include "merge/model_index.h"

namespace pb::app {

Result<std::string> ChooseBaseFile(std::string_view dir, std::span<const std::string> files) {
  auto listed = [&](std::string_view name) { return std::find(files.begin(), files.end(), name) != files.end(); };
  if (listed(merge::kIndexFileName)) return std::string(merge::kIndexFileName);
  if (listed(kSingleModelName)) return std::string(kSingleModelName);
  return MakeError(ErrorCode::IoError,
                   "`" + std::string(dir) + "` has neither model.safetensors nor model.safetensors.index.json");
}

bool IsModelIndexName(std::string_view name) { return name.ends_with(".safetensors.index.json"); }

}  // namespace pb::app
