#include "app/base_layout.h"

#include <algorithm>

#include "core/utf8.h"
#include "merge/model_index.h"

namespace pb::app {

Result<std::string> ChooseBaseFile(std::string_view dir, std::span<const std::string> files) {
  auto listed = [&](std::string_view name) { return std::find(files.begin(), files.end(), name) != files.end(); };
  if (listed(merge::kIndexFileName)) return std::string(merge::kIndexFileName);
  if (listed(kSingleModelName)) return std::string(kSingleModelName);
  std::string message = "`" + std::string(dir) + "` has neither model.safetensors nor model.safetensors.index.json";
  // An adapter's folder (a Hub adapter repo, most often) given where a model belongs.
  if (listed("adapter_config.json"))
    message +=
        ": it is an adapter (adapter_config.json); `peft-bridge adapter-info " + std::string(dir) + "` describes it";
  return MakeError(ErrorCode::IoError, std::move(message));
}

Result<RemoteBaseFiles> ChooseRemoteBase(const net::RemoteAddress& address, std::span<const std::string> listing) {
  RemoteBaseFiles files;
  if (address.folder) {
    PB_ASSIGN_OR_RETURN(auto first, ChooseBaseFile(address.label, listing));
    if (IsModelIndexName(first)) files.index = std::move(first);
    else files.single = std::move(first);
    const bool has_config = std::find(listing.begin(), listing.end(), "config.json") != listing.end();
    files.config = has_config ? RemoteBaseFiles::Config::kListed : RemoteBaseFiles::Config::kNone;
    for (const auto& name : listing) files.listing.push_back({name, EntryKind::kFile});
    return files;
  }
  std::string name = net::RemoteFileName(address);
  if (IsModelIndexName(name)) files.index = std::move(name);
  else if (name.ends_with(".safetensors")) files.single = std::move(name);
  else
    return MakeError(ErrorCode::InvalidArgument, "`" + ClipForMessage(address.label, 1000) +
                                                     "` is neither a .safetensors file nor a model index: a base is a "
                                                     "model's folder, its index or its one .safetensors file");
  files.config = RemoteBaseFiles::Config::kMaybe;
  return files;
}

bool IsModelIndexName(std::string_view name) { return name.ends_with(".safetensors.index.json"); }

bool NamesRemoteModel(const net::RemoteAddress& address) {
  return address.folder || IsModelIndexName(net::RemoteFileName(address));
}

}  // namespace pb::app
