// A remote adapter (adapter-info, translate, merge --adapter): which files are read is the shared rules'
// (app/remote_address.h, app/adapter_files.h); this only fetches them. web/bin/peft-bridge.mjs fetches the same
// files in the same order, so both CLIs fail alike.
#include "app/adapter_files.h"
#include "app/remote_address.h"
#include "cli/adapter_dir.h"
#include "cli/http_source.h"

namespace pb::cli {

Result<AdapterDir> LoadRemoteAdapter(const std::string& given, const std::optional<std::string>& base_config_path) {
  auto address = ParseRemote(given);
  if (!address.ok()) return address.error();
  const app::RemoteAddress& a = address.value();
  AdapterDir dir;
  std::string weights_name;
  std::optional<app::RemoteFile> config;
  bool config_optional = false;
  if (a.folder) {
    // A repo (or a folder of one): its listing, chosen from as a local directory's.
    auto listing = ReadRemoteWhole(app::RemoteSelf(a), WholeCap::kJson);
    if (!listing.ok()) return listing.error();
    auto names = app::ParseHubListing(std::string(listing->bytes.begin(), listing->bytes.end()), a.label);
    if (!names.ok()) return names.error();
    auto chosen = app::ChooseAdapterFiles(a.label, names.value());
    if (!chosen.ok()) return chosen.error();
    weights_name = chosen->weights;
    if (chosen->config) config = app::RemoteEntry(a, *chosen->config);
  } else {
    // The weights file itself, with adapter_config.json beside it when there is one.
    if (Status s = app::CheckAdapterWeightsPath(app::RemoteFileName(a)); !s.ok()) return s.error();
    config = app::RemoteEntry(a, app::kAdapterConfigName);
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
  const app::RemoteFile weights = a.folder ? app::RemoteEntry(a, weights_name, commit) : app::RemoteSelf(a);
  auto bytes = ReadRemoteWhole(weights, WholeCap::kAdapter);
  if (!bytes.ok()) return bytes.error();
  dir.weights_path = weights.label;
  dir.weights_name = a.folder ? weights_name : app::RemoteFileName(a);
  dir.weights_bytes = std::move(bytes->bytes);
  if (base_config_path) {
    auto text = ReadText(*base_config_path);
    if (!text.ok()) return text.error();
    dir.base_config = std::move(text.value());
  }
  if (Status s = ReadAdapterHeader(dir); !s.ok()) return s.error();
  return dir;
}

}  // namespace pb::cli
