// A remote adapter (adapter-info, translate, merge --adapter): which files are read is the shared rules'
// (net/remote_address.h, app/adapter_files.h); this only fetches them. web/bin/peft-bridge.mjs fetches the same
// files in the same order, so both CLIs fail alike.
#include "app/adapter_files.h"
#include "cli/adapter_dir.h"
#include "cli/http_source.h"
#include "net/remote_address.h"

namespace pb::cli {

Result<AdapterDir> OpenRemoteAdapter(const std::string& given, const std::optional<std::string>& base_config_path) {
  PB_ASSIGN_OR_RETURN(auto address, ParseRemote(given));
  const net::RemoteAddress& a = address;
  AdapterDir dir;
  std::string weights_name;
  std::optional<net::RemoteFile> config;
  bool config_optional = false;
  if (a.folder) {
    // A repo (or a folder of one): its listing, chosen from as a local directory's.
    PB_ASSIGN_OR_RETURN(auto listing, ReadRemoteWhole(net::RemoteSelf(a), WholeCap::kJson));
    PB_ASSIGN_OR_RETURN(auto names,
                        net::ParseHubListing(std::string(listing.bytes.begin(), listing.bytes.end()), a.label));
    PB_ASSIGN_OR_RETURN(auto chosen, app::ChooseAdapterFiles(a.label, names));
    weights_name = chosen.weights;
    if (chosen.config) config = net::RemoteEntry(a, *chosen.config);
  } else {
    // The weights file itself, with adapter_config.json beside it when there is one.
    PB_RETURN_IF_ERROR(app::CheckAdapterWeightsPath(net::RemoteFileName(a)));
    config = net::RemoteEntry(a, app::kAdapterConfigName);
    config_optional = true;
  }
  std::optional<std::string> commit;
  if (config) {
    int status = 0;
    auto text = ReadRemoteWhole(*config, WholeCap::kJson, &status);
    if (text.ok()) {
      dir.config = std::string(text->bytes.begin(), text->bytes.end());
      commit = text->commit;  // the weights from the config's commit: a moving branch cannot mix two versions
    } else if (!config_optional || status != 404) {
      return text.error();
    }
  }
  const net::RemoteFile weights = a.folder ? net::RemoteEntry(a, weights_name, commit) : net::RemoteSelf(a);
  PB_ASSIGN_OR_RETURN(auto bytes, ReadRemoteWhole(weights, WholeCap::kAdapter));
  dir.weights_path = weights.label;
  dir.weights_name = a.folder ? weights_name : net::RemoteFileName(a);
  dir.weights_bytes = std::move(bytes.bytes);
  if (base_config_path) {
    PB_ASSIGN_OR_RETURN(auto text, ReadText(*base_config_path));
    dir.base_config = std::move(text);
  }
  return dir;
}

}  // namespace pb::cli
