#include "app/base_config_source.h"

#include "core/json.h"

namespace pb::app {

namespace {

// A Hub model id as transformers takes it: "owner/name" (two segments, no path syntax).
bool LooksLikeHubId(std::string_view name) {
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == name.size()) return false;
  if (name.find('/', slash + 1) != std::string_view::npos) return false;
  if (name.starts_with(".") || name.find('\\') != std::string_view::npos || name.find(':') != std::string_view::npos)
    return false;
  return name.find("..") == std::string_view::npos;
}

std::string HubAddress(const AdapterBaseModel& base) {
  return "hf://" + base.name + (base.revision ? "@" + *base.revision : "");
}

// The config.json a remote --base-config (or the adapter's Hub base) names.
Result<net::RemoteFile> RemoteConfig(std::string_view address, std::string_view endpoint) {
  PB_ASSIGN_OR_RETURN(auto a, net::ParseRemoteAddress(address, endpoint));
  return a.folder ? net::RemoteEntry(a, "config.json") : net::RemoteSelf(a);
}

}  // namespace

std::optional<AdapterBaseModel> AdapterBaseModelOf(std::string_view adapter_config_json) {
  auto parsed = ParseJson(adapter_config_json, "adapter_config.json");
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  auto name = parsed->find("base_model_name_or_path");
  if (name == parsed->end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  AdapterBaseModel base{name->get<std::string>(), std::nullopt};
  auto revision = parsed->find("revision");
  if (revision != parsed->end() && revision->is_string() && !revision->get<std::string>().empty())
    base.revision = revision->get<std::string>();
  return base;
}

std::string LocalBaseConfigPath(std::string_view name) {
  std::string dir(name);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/config.json";
}

Result<BaseConfigChoice> ChooseBaseConfig(const BaseConfigFacts& facts) {
  BaseConfigChoice choice;
  if (facts.flag) {
    if (net::IsRemoteArgument(*facts.flag)) {
      PB_ASSIGN_OR_RETURN(choice.remote, RemoteConfig(*facts.flag, facts.endpoint));
      choice.kind = BaseConfigChoice::Kind::kRemote;
    } else {
      choice.kind = BaseConfigChoice::Kind::kLocal;
      choice.path = *facts.flag;
    }
    return choice;
  }
  if (!facts.base) {
    choice.hint = "adapter_config.json names no base_model_name_or_path: pass --base-config BASE/config.json";
    return choice;
  }
  const AdapterBaseModel& base = *facts.base;
  if (facts.local_config_exists) {
    choice.kind = BaseConfigChoice::Kind::kLocal;
    choice.path = LocalBaseConfigPath(base.name);
    choice.note = "base config: " + choice.path + " (the adapter's base_model_name_or_path)";
    return choice;
  }
  const bool hub = LooksLikeHubId(base.name);
  if (hub && facts.adapter_remote) {
    auto remote = RemoteConfig(HubAddress(base), facts.endpoint);
    if (remote.ok()) {
      choice.kind = BaseConfigChoice::Kind::kRemote;
      choice.remote = std::move(remote.value());
      choice.note = "base config: " + choice.remote.label + " (the adapter's base_model_name_or_path, on the Hub)";
      return choice;
    }
  }
  choice.hint = "the adapter's base_model_name_or_path `" + base.name + "` is not a local folder with config.json";
  choice.hint += hub ? "; pass --base-config " + HubAddress(base) +
                           " (its config.json, read from the Hub) or a local "
                           "copy's config.json"
                     : "; pass --base-config BASE/config.json";
  return choice;
}

}  // namespace pb::app
