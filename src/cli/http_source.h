// Remote input for the native CLI: http(s) URLs and hf://owner/repo/path[@revision] Hub addresses, read with
// libcurl by Range requests. Like file_io.h this is an edge: libcurl is only the transport of the HTTP policy
// (app/http_policy.h: retries, deadlines, redirects, token scope), which the JS client (web/src/range-client.js)
// drives too, so both CLIs make the same requests and print the same bytes; the bytes go to the core's
// StreamingReader, so a remote header is validated exactly as a local file of the same size.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/remote_address.h"
#include "core/header.h"

namespace pb::cli {

// True for an argument naming a remote file or folder: http://, https:// or hf://.
bool IsRemoteAddress(const std::string& arg);

// HF_ENDPOINT, else https://huggingface.co (without a trailing '/').
std::string HubEndpoint();
// `arg` as app::ParseRemoteAddress reads it against HubEndpoint().
Result<app::RemoteAddress> ParseRemote(const std::string& arg);

struct RemoteBytes {
  std::vector<uint8_t> bytes;
  std::optional<std::string> commit;  // X-Repo-Commit, when the Hub named it
};
enum class WholeCap { kJson, kAdapter };  // PB_HTTP_MAX_JSON_BYTES or PB_HTTP_MAX_ADAPTER_BYTES
// A whole remote file, held to its cap. On failure `failed_status` (when given) gets the HTTP status it failed
// with (404 for an absent file), 0 for none.
Result<RemoteBytes> ReadRemoteWhole(const app::RemoteFile& file, WholeCap cap, int* failed_status = nullptr);

// Reads and validates a remote file's header with one Range request for the first 64 KiB, and one more only if
// the header is longer (a server that ignores Range is read as one stream, up to the header's end). hf://
// addresses resolve against HF_ENDPOINT (default https://huggingface.co); the token (HF_TOKEN, else the token file
// huggingface_hub writes) is sent as a Bearer token to that endpoint's origin only. The PB_HTTP_* variables set
// the policy's limits (docs/remote.md).
Result<Header> ReadRemoteHeader(const std::string& arg);
Result<Header> ReadRemoteHeader(const app::RemoteFile& file);

}  // namespace pb::cli
