// Remote input for the native CLI: http(s) URLs and hf://owner/repo/path[@revision] Hub addresses, read with
// libcurl by Range requests. Like file_io.h this is an edge: libcurl is only the transport of the HTTP policy
// (net/http_policy.h: retries, deadlines, redirects, token scope), which the JS client (web/src/remote/range-client.js)
// drives too, so both CLIs make the same requests and print the same bytes; the bytes go to the core's
// StreamingReader, so a remote header is validated exactly as a local file of the same size.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/header.h"
#include "net/remote_address.h"

namespace pb::net {
class HttpFilePolicy;
struct HttpLimits;
enum class TransportError : uint8_t;
}  // namespace pb::net

namespace pb::cli {

class CurlTransport;

// True for an argument naming a remote file or folder: http://, https:// or hf://.
bool IsRemoteAddress(const std::string& arg);

// How a libcurl failure (a CURLcode) reads as the retry decision's TransportError, for every libcurl transport.
net::TransportError CurlTransportError(int curl_code);

// The HTTP policy's limits from the PB_HTTP_* variables (docs/remote.md), as both CLIs read them.
Result<net::HttpLimits> LimitsFromEnv();
// HF_ENDPOINT, else https://huggingface.co (without a trailing '/').
std::string HubEndpoint();
// HF_TOKEN, else the token file huggingface_hub writes (empty when there is none).
std::string HubToken();
// `arg` as net::ParseRemoteAddress reads it against HubEndpoint().
Result<net::RemoteAddress> ParseRemote(const std::string& arg);

struct RemoteBytes {
  std::vector<uint8_t> bytes;
  std::optional<std::string> commit;  // X-Repo-Commit, when the Hub named it
};
enum class WholeCap { kJson, kAdapter };  // PB_HTTP_MAX_JSON_BYTES or PB_HTTP_MAX_ADAPTER_BYTES
// A whole remote file, held to its cap. On failure `failed_status` (when given) gets the HTTP status it failed
// with (404 for an absent file), 0 for none.
Result<RemoteBytes> ReadRemoteWhole(const net::RemoteFile& file, WholeCap cap, int* failed_status = nullptr);

// One remote file read by ranges under one policy: every read is held to the first answer's ETag and size, so a
// file that changes between its header and its data fails instead of mixing two versions.
class RemoteReader {
 public:
  // Gets the bytes as they arrive; an error it returns ends the read with that error.
  using Deliver = std::function<Status(std::span<const uint8_t>)>;

  static Result<RemoteReader> Open(const net::RemoteFile& file);
  RemoteReader(RemoteReader&&) noexcept;
  ~RemoteReader();

  // The header, read and validated as ReadRemoteHeader says.
  Result<Header> ReadHeader();
  // Bytes [start, end) (end clamped to the file's size; net::kUnbounded for "to the end"), in pieces of 64 MiB,
  // each one request on a kept connection, so that PB_HTTP_TOTAL_MS bounds a piece rather than a whole shard.
  Status Stream(uint64_t start, uint64_t end, const Deliver& deliver);
  // The whole file, held to `cap`.
  Status ReadWhole(WholeCap cap, const Deliver& deliver);

  std::optional<uint64_t> size() const;
  const std::optional<std::string>& commit() const;  // X-Repo-Commit, once an answer named it
  int failed_status() const;                         // as ReadRemoteWhole's `failed_status`

 private:
  RemoteReader(net::RemoteFile file, net::HttpFilePolicy policy);
  net::RemoteFile file_;
  std::unique_ptr<net::HttpFilePolicy> policy_;
  std::unique_ptr<CurlTransport> transport_;
};

// Reads and validates a remote file's header with one Range request for the first 64 KiB, and one more only if
// the header is longer (a server that ignores Range is read as one stream, up to the header's end). hf://
// addresses resolve against HF_ENDPOINT (default https://huggingface.co); the token (HF_TOKEN, else the token file
// huggingface_hub writes) is sent as a Bearer token to that endpoint's origin only. The PB_HTTP_* variables set
// the policy's limits (docs/remote.md).
Result<Header> ReadRemoteHeader(const std::string& arg);
Result<Header> ReadRemoteHeader(const net::RemoteFile& file);

}  // namespace pb::cli
