// The limits of every HTTP request peft-bridge makes (file reads and a push's calls alike), each configurable by
// an environment variable natively and by an option in the JS API (docs/remote.md lists them), and the decimal
// reading that headers and limits share.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace pb::net {

inline constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

struct HttpLimits {
  uint32_t retries = 5;                     // PB_HTTP_RETRIES: failed attempts in a row retried (an attempt that
                                            // brought bytes resets the count, unless it was too slow)
  uint32_t backoff_ms = 250;                // PB_HTTP_BACKOFF_MS: the first wait, doubled after each failure...
  uint32_t backoff_max_ms = 8000;           // ...up to this
  uint32_t max_retry_after_s = 10;          // a Retry-After longer than this fails at once instead of waiting
  uint32_t idle_ms = 10'000;                // PB_HTTP_IDLE_MS: no answer, or no byte, for this long (as
                                            // huggingface_hub's HF_HUB_DOWNLOAD_TIMEOUT)
  uint32_t total_ms = 600'000;              // PB_HTTP_TOTAL_MS: one read, every attempt and wait included
  uint32_t min_rate = 1024;                 // PB_HTTP_MIN_RATE: bytes/s a flowing body must average per window
  uint32_t rate_window_ms = 30'000;         // PB_HTTP_RATE_WINDOW_MS
  uint32_t max_redirects = 10;              // PB_HTTP_MAX_REDIRECTS
  uint64_t max_json_bytes = 64ull << 20;    // PB_HTTP_MAX_JSON_BYTES: a JSON file (index, config) read whole
  uint64_t max_adapter_bytes = 2ull << 30;  // PB_HTTP_MAX_ADAPTER_BYTES: an adapter's weights, which the CLIs
                                            // read whole (a base model is never read whole)
};

// The environment variables (and WASM option names) that set HttpLimits, in the order documented.
const std::vector<std::string_view>& HttpLimitNames();

// Sets the limit called `name` (one of HttpLimitNames()) from its decimal text; InvalidArgument otherwise.
Status SetHttpLimit(HttpLimits& limits, std::string_view name, std::string_view value);

// A decimal number of 1 to 19 digits (nothing else); nullopt otherwise.
std::optional<uint64_t> ParseDecimal(std::string_view digits);
// A header's value without the spaces and tabs around it (and a header line's CR/LF).
std::string_view TrimHeaderValue(std::string_view value);
// ParseDecimal of TrimHeaderValue: a header's or a limit's number.
std::optional<uint64_t> ParseHttpDecimal(std::string_view text);

}  // namespace pb::net
