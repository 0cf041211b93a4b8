// Where translate --to gguf|gguf-names finds the base model's config.json (its architecture and head counts),
// the rule convert_lora_to_gguf.py follows, written once for both CLIs and the JS API:
//   1. --base-config wins: a local file, or a remote address (hf://owner/repo[@rev] means its config.json, a file
//      address or URL that file), read as merge reads a remote base: only because the user named it;
//   2. else the adapter's base_model_name_or_path, when it names a local folder holding config.json (said in the
//      output);
//   3. else, when the adapter itself is read from the Hub (the run already asks the Hub), that Hub repo's
//      config.json (at the adapter config's `revision`, if any);
//   4. else none: what needs the config then fails naming base_model_name_or_path and the --base-config to pass.
// Sans-I/O: the caller looks for the folder (LocalBaseConfigPath) and reads what the choice names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "net/remote_address.h"

namespace pb::app {

// The base model an adapter_config.json names (base_model_name_or_path, and its `revision`); nullopt when the
// text is not a JSON object naming one.
struct AdapterBaseModel {
  std::string name;
  std::optional<std::string> revision;
};
std::optional<AdapterBaseModel> AdapterBaseModelOf(std::string_view adapter_config_json);

// The config.json a local folder named `name` would hold (the caller checks that it is a regular file).
std::string LocalBaseConfigPath(std::string_view name);

struct BaseConfigFacts {
  std::optional<std::string> flag;                 // --base-config as given
  std::optional<AdapterBaseModel> base;            // from the adapter's config
  bool local_config_exists = false;                // LocalBaseConfigPath(base->name) is a regular file
  bool adapter_remote = false;                     // the adapter is read from a remote address
  std::string endpoint{net::kDefaultHubEndpoint};  // HF_ENDPOINT
};

struct BaseConfigChoice {
  enum class Kind { kNone, kLocal, kRemote };
  Kind kind = Kind::kNone;
  std::string path;        // kLocal: the file to read
  net::RemoteFile remote;  // kRemote
  // How the output says where the config came from when the user did not name it ("" when --base-config did).
  std::string note;
  // kNone: appended to every refusal that needs the config (head counts, the architecture).
  std::string hint;
};

// InvalidArgument for a remote --base-config that is not a valid address.
Result<BaseConfigChoice> ChooseBaseConfig(const BaseConfigFacts& facts);

}  // namespace pb::app
