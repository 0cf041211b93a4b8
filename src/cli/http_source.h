// Remote input for the native CLI: http(s) URLs and hf://owner/repo/path[@revision] Hub addresses, read with
// libcurl by Range requests. Like file_io.h this is an edge: it fetches bytes and hands them to the core's
// StreamingReader, so a remote header is validated exactly as a local file of the same size. It follows the
// JS client (web/src/hub.js) rule for rule, so both CLIs make the same requests and print the same bytes.
#pragma once

#include <string>

#include "core/header.h"

namespace pb::cli {

// True for an argument naming a remote file: http://, https:// or hf://.
bool IsRemoteAddress(const std::string& arg);

// Reads and validates a remote file's header with one Range request for the first 64 KiB, and one more only if
// the header is longer (a server that ignores Range is read as one stream, up to the header's end). hf://
// addresses resolve against HF_ENDPOINT (default https://huggingface.co); HF_TOKEN is sent as a Bearer token to
// that endpoint's origin only. Redirects are followed; network errors, truncated bodies and 5xx / 429 answers are
// retried with backoff, resuming at the byte reached; an ETag or size that changes between answers is an IoError.
Result<Header> ReadRemoteHeader(const std::string& arg);

}  // namespace pb::cli
