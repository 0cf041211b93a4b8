#include "net/http_limits.h"

#include <string>

namespace pb::net {

std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::string_view TrimHeaderValue(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> ParseHttpDecimal(std::string_view text) { return ParseDecimal(TrimHeaderValue(text)); }

const std::vector<std::string_view>& HttpLimitNames() {
  static const std::vector<std::string_view> names = {
      "PB_HTTP_RETRIES",       "PB_HTTP_BACKOFF_MS",     "PB_HTTP_IDLE_MS",
      "PB_HTTP_TOTAL_MS",      "PB_HTTP_MIN_RATE",       "PB_HTTP_RATE_WINDOW_MS",
      "PB_HTTP_MAX_REDIRECTS", "PB_HTTP_MAX_JSON_BYTES", "PB_HTTP_MAX_ADAPTER_BYTES"};
  return names;
}

Status SetHttpLimit(HttpLimits& limits, std::string_view name, std::string_view value) {
  std::optional<uint64_t> v = ParseHttpDecimal(value);
  auto bad = [&](std::string_view what) {
    return MakeError(ErrorCode::InvalidArgument,
                     std::string(name) + " must be " + std::string(what) + ", got `" + std::string(value) + "`");
  };
  auto u32 = [&](uint32_t& field, uint64_t min) -> Status {
    if (!v || *v < min || *v > 0xFFFF'FFFFu)
      return bad(min == 0 ? "a whole number below 2^32" : "a whole number from 1 below 2^32");
    field = static_cast<uint32_t>(*v);
    return Status::Ok();
  };
  if (name == "PB_HTTP_RETRIES") return u32(limits.retries, 0);
  if (name == "PB_HTTP_BACKOFF_MS") return u32(limits.backoff_ms, 0);
  if (name == "PB_HTTP_IDLE_MS") return u32(limits.idle_ms, 1);
  if (name == "PB_HTTP_TOTAL_MS") return u32(limits.total_ms, 1);
  if (name == "PB_HTTP_MIN_RATE") return u32(limits.min_rate, 0);
  if (name == "PB_HTTP_RATE_WINDOW_MS") return u32(limits.rate_window_ms, 1);
  if (name == "PB_HTTP_MAX_REDIRECTS") return u32(limits.max_redirects, 0);
  if (name == "PB_HTTP_MAX_JSON_BYTES") {
    if (!v || *v == 0) return bad("a whole number from 1");
    limits.max_json_bytes = *v;
    return Status::Ok();
  }
  if (name == "PB_HTTP_MAX_ADAPTER_BYTES") {
    if (!v || *v == 0) return bad("a whole number from 1");
    limits.max_adapter_bytes = *v;
    return Status::Ok();
  }
  return MakeError(ErrorCode::InvalidArgument, "unknown HTTP limit `" + std::string(name) + "`");
}

}  // namespace pb::net
