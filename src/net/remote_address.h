// What a remote argument of the CLIs names, written once so both CLIs read the same files: an http(s) URL (one
// file), or a Hub address hf://owner/repo[/path][@revision], which names one file when its last segment ends in
// .safetensors or .json (or .bin, .pt, .pth: pickles, refused by name) and a folder otherwise (the repo itself
// without a path); huggingface_hub's hf://owner/repo@revision/path names the same (ParseRemoteAddress). A folder is
// listed with the Hub's tree API; the files of a model or an adapter in it are then chosen by the rules of a local
// directory (app/adapter_files.h, app/base_layout.h). Sans-I/O: the CLIs fetch, this only says what.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/result.h"

namespace pb::net {

inline constexpr std::string_view kDefaultHubEndpoint = "https://huggingface.co";

// One remote file: the URL to request and how messages name it.
struct RemoteFile {
  std::string url;
  std::string label;
};

struct RemoteAddress {
  bool folder = false;  // a Hub repo or one of its folders; else one file
  std::string label;    // the argument as given
  std::string url;      // a file: its URL; a folder: its tree listing's URL
  // Hub addresses only.
  bool hub = false;
  std::string endpoint, repo, revision, path;  // path: the file, or the folder ("" for the repo's root)
  bool explicit_revision = false;
  bool revision_first = false;  // written hf://owner/repo@revision/path (huggingface_hub's form): labels follow it
};

// True for an argument naming something remote: http://, https:// or hf:// (any case).
bool IsRemoteArgument(std::string_view arg);

// JavaScript's encodeURIComponent, so that every client requests the same URL.
std::string EncodeUriComponent(std::string_view s);

// `arg` (IsRemoteArgument) resolved against the Hub `endpoint` (HF_ENDPOINT; trailing '/' ignored). Hub
// addresses are read in either form, naming the same thing:
//  - huggingface_hub's (HfFileSystem, parse_hf_uri): hf://[models/]owner/repo@revision[/path], when the first
//    '@' follows owner/repo; the revision ends at the next '/' (a '/' in it written %2F), but refs/pr/N and
//    refs/convert/NAME are read whole;
//  - ours: hf://owner/repo[/path][@revision], the revision after the last '@' (it may hold '/', as refs/pr/1).
// Either revision is %XX-decoded, as huggingface_hub decodes it. InvalidArgument for a datasets/, spaces/,
// kernels/ or buckets/ address (no model repo), fewer than owner/repo, an empty revision, or an empty, '.' or
// '..' segment.
Result<RemoteAddress> ParseRemoteAddress(std::string_view arg, std::string_view endpoint);

// `arg` as one file, whatever its name (the JS API's openRemote / readTensor / inspect of an address): an
// hf://owner/repo/path[@revision] address's resolve URL, or the URL itself. InvalidArgument as ParseRemoteAddress,
// and for a Hub address without a path.
Result<RemoteFile> RemoteFileAddress(std::string_view arg, std::string_view endpoint);

// The file `name` inside a folder address, or beside a file address; a Hub address at `commit` when given (the
// commit the first answer named, so that a branch moving meanwhile cannot mix two versions). Its label is the
// address a user would type for it (hf://owner/repo/path[@revision], or the URL).
RemoteFile RemoteEntry(const RemoteAddress& address, std::string_view name,
                       const std::optional<std::string>& commit = std::nullopt);

// The address itself as a file (its URL and the label as given).
RemoteFile RemoteSelf(const RemoteAddress& address);

// The last path segment of a file address (a URL's without its query): the name the file rules look at.
std::string RemoteFileName(const RemoteAddress& address);

// The names of the files directly in a folder, from the Hub tree API's answer (a JSON array of
// {type, path}); IoError naming `label` when it is not one.
Result<std::vector<std::string>> ParseHubListing(std::string_view json_text, std::string_view label);

}  // namespace pb::net
