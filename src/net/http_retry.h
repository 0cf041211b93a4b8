// The one HTTP retry decision of peft-bridge: after an attempt failed, whether to try again and after how long.
// Every transport asks it and none has a rule of its own: the file reads (HttpFilePolicy, behind libcurl and
// behind fetch) and the calls of a push (HttpCallClock::DecideRetry, behind libcurl in the native CLI and through
// the WASM binding in web/src/remote/push.js). Sans-I/O: it reads no clock; the caller says how long is left.
//
// The rule (docs/remote.md):
//  - retried: an attempt that got no answer (no connection, a broken one, a name that did not resolve, no answer
//    or no byte in time, a body cut short, a body too slow), except a TLS failure or a refused scheme; and the
//    answers 408, 429, 500, 502, 503 and 504, the statuses huggingface_hub's http_backoff retries. Every other
//    status is final: 501, 505 and the like do not change by asking again.
//  - at most limits.retries failed attempts in a row are retried;
//  - the wait is the server's Retry-After when it gives one, as delay-seconds or as an HTTP-date (counted from
//    the same answer's Date header, so neither a clock nor the skew between two clocks comes in; without a Date
//    header the date is not used); else backoff_ms doubled after each failure up to backoff_max_ms, without
//    jitter, so every client waits the same, predictable times;
//  - a Retry-After longer than max_retry_after_s is not shortened: retrying sooner than the server asked would
//    be refused again, so the attempt's failure is final at once, and the reason says how long it asked;
//  - a wait that would reach the deadline (of the read, or of the call) is not started.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/http_limits.h"

namespace pb::net {

// How an attempt failed without an answer (the values cross the WASM binding as numbers: append only).
enum class TransportError : uint8_t {
  kResolve,    // the host name did not resolve
  kConnect,    // no connection (refused, unreachable, connect timeout)
  kBroken,     // the connection failed after it was made (reset, closed early, protocol error); also a deadline
               // that passed and a body cut short
  kTls,        // TLS handshake or certificate failure: not retried
  kBadScheme,  // the transport refused the URL's scheme: not retried
};

// What ended a failed attempt: an answer's status with its Retry-After and Date headers, or, with status 0, how
// the transport failed.
struct AttemptFailure {
  int status = 0;
  TransportError transport = TransportError::kBroken;
  std::optional<std::string> retry_after{}, date{};
};

enum class GiveUp : uint8_t {
  kNo,                 // retry after wait_ms
  kFinal,              // this status or transport failure is never retried
  kRetriesSpent,       // limits.retries failed attempts in a row already
  kServerWaitTooLong,  // Retry-After asked for more than max_retry_after_s
  kDeadline,           // the wait would reach the deadline
};

struct RetryDecision {
  GiveUp give_up = GiveUp::kNo;
  uint64_t wait_ms = 0;  // when retried
  // Why it gives up, when the attempt's own error does not tell (a Retry-After too long): what the transports
  // add to that error, in parentheses. "" otherwise.
  std::string reason;
  bool retry() const { return give_up == GiveUp::kNo; }
};

// True for the statuses that are retried (408, 429, 500, 502, 503, 504).
bool IsRetriedStatus(int status);

// Seconds from `date` (the answer's Date header) until `retry_after`: delay-seconds as they are (saturating past
// 19 digits), or an HTTP-date (IMF-fixdate, RFC 850 or asctime form) minus the Date header, 0 for a date already
// passed; nullopt when the value is neither, or is a date without a Date header to count from.
std::optional<uint64_t> RetryAfterSeconds(std::string_view retry_after, std::optional<std::string_view> date);

// Seconds since 1970-01-01T00:00:00Z of an HTTP-date in any of its three forms; nullopt otherwise.
std::optional<int64_t> ParseHttpDate(std::string_view text);

// The decision after a failed attempt: `failures` counts the failed attempts in a row before this one, and
// `time_left_ms` is how long the read or call may still last.
RetryDecision DecideRetry(const HttpLimits& limits, const AttemptFailure& failure, uint32_t failures,
                          int64_t time_left_ms);

}  // namespace pb::net
