// Which file of a model directory a command reads first: the index of a sharded model, else the single file.
// Sans-I/O, as app/adapter_files.h: the edge lists the directory (a local folder, a Hub repo's tree), this chooses.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "app/base_extras.h"
#include "core/result.h"
#include "net/remote_address.h"

namespace pb::app {

inline constexpr std::string_view kSingleModelName = "model.safetensors";

// model.safetensors.index.json when listed (the shards are then the index's), else model.safetensors; IoError
// naming `dir` when neither is listed (pointing at adapter-info when adapter_config.json is).
Result<std::string> ChooseBaseFile(std::string_view dir, std::span<const std::string> files);

// True for the name of a sharded model's index (model.safetensors.index.json, and the same file under another
// model name, as diffusers' diffusion_pytorch_model.safetensors.index.json).
bool IsModelIndexName(std::string_view name);

// True when `address` names a model's folder or its index (inspect then reads every shard), not one file.
bool NamesRemoteModel(const net::RemoteAddress& address);

// What a merge reads of a remote base (`--base hf://owner/repo[/folder]`, or the URL of a .safetensors file or of
// an index), in the order both CLIs read it:
//  1. a folder's listing (the caller fetches it and passes its names);
//  2. `index`, read whole under the JSON cap, when there is one: its shards follow, read from the commit its
//     answer named (RemoteEntry(address, shard, commit)), so a branch that moves meanwhile cannot mix two
//     versions; else the one shard `single`;
//  3. config.json beside them: read when `config` is kListed; tried when kMaybe (a file address: a 404 means
//     there is none); never when kNone;
//  4. the folder's other files (`listing`, for PlanExtraFiles), copied as a local folder's are.
struct RemoteBaseFiles {
  enum class Config : uint8_t { kNone, kListed, kMaybe };
  std::optional<std::string> index;
  std::string single;
  Config config = Config::kNone;
  std::vector<BaseEntry> listing;  // a folder's files (empty for a file address)
};

// `listing`: the folder's file names (ignored for a file address). IoError as ChooseBaseFile for a folder with
// no model; InvalidArgument for a file address that is neither a .safetensors file nor an index.
Result<RemoteBaseFiles> ChooseRemoteBase(const net::RemoteAddress& address, std::span<const std::string> listing);

}  // namespace pb::app
