#include "net/http_retry.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

namespace pb::net {
namespace {

// Days from 1970-01-01 to year-month-day of the proleptic Gregorian calendar.
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

std::optional<int64_t> Number(std::string_view s, size_t min_digits, size_t max_digits) {
  if (s.size() < min_digits || s.size() > max_digits) return std::nullopt;
  std::optional<uint64_t> v = ParseDecimal(s);
  if (!v) return std::nullopt;
  return static_cast<int64_t>(*v);
}

std::optional<int64_t> Month(std::string_view s) {
  static constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                               "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (size_t i = 0; i < kMonths.size(); ++i)
    if (s == kMonths[i]) return static_cast<int64_t>(i + 1);
  return std::nullopt;
}

bool IsWord(std::string_view s) {
  auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  return !s.empty() && std::all_of(s.begin(), s.end(), letter);
}

}  // namespace

bool IsRetriedStatus(int status) {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

std::optional<int64_t> ParseHttpDate(std::string_view text) {
  // The three forms, split at spaces, commas, dashes and colons:
  //   IMF-fixdate  Sun, 06 Nov 1994 08:49:37 GMT      day-name dd Mon yyyy hh mm ss GMT
  //   RFC 850      Sunday, 06-Nov-94 08:49:37 GMT     day-name dd Mon yy hh mm ss GMT
  //   asctime      Sun Nov  6 08:49:37 1994           day-name Mon d hh mm ss yyyy
  std::vector<std::string_view> t;
  text = TrimHeaderValue(text);
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ' ' || text[i] == ',' || text[i] == '-' || text[i] == ':') {
      if (i > start) t.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  std::optional<int64_t> day, month, year, hour, minute, second;
  if (t.size() == 8 && t[7] == "GMT" && IsWord(t[0])) {
    day = Number(t[1], 2, 2);
    month = Month(t[2]);
    year = Number(t[3], 4, 4);
    if (!year) {
      // RFC 850's two-digit year: the nearest one from 1970 on (a Retry-After is never decades away).
      year = Number(t[3], 2, 2);
      if (year) *year += *year < 70 ? 2000 : 1900;
    }
    hour = Number(t[4], 2, 2);
    minute = Number(t[5], 2, 2);
    second = Number(t[6], 2, 2);
  } else if (t.size() == 7 && IsWord(t[0])) {
    month = Month(t[1]);
    day = Number(t[2], 1, 2);
    hour = Number(t[3], 2, 2);
    minute = Number(t[4], 2, 2);
    second = Number(t[5], 2, 2);
    year = Number(t[6], 4, 4);
  }
  if (!day || !month || !year || !hour || !minute || !second) return std::nullopt;
  if (*day < 1 || *day > 31 || *hour > 23 || *minute > 59 || *second > 60) return std::nullopt;
  return DaysFromCivil(*year, *month, *day) * 86400 + *hour * 3600 + *minute * 60 + *second;
}

std::optional<uint64_t> RetryAfterSeconds(std::string_view retry_after, std::optional<std::string_view> date) {
  std::string_view v = TrimHeaderValue(retry_after);
  if (!v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    std::optional<uint64_t> s = ParseDecimal(v);
    return s ? *s : std::numeric_limits<uint64_t>::max();  // more than 19 digits: longer than any limit
  }
  std::optional<int64_t> at = ParseHttpDate(v);
  std::optional<int64_t> now = date ? ParseHttpDate(*date) : std::nullopt;
  if (!at || !now) return std::nullopt;
  return *at > *now ? static_cast<uint64_t>(*at - *now) : 0;
}

RetryDecision DecideRetry(const HttpLimits& limits, const AttemptFailure& failure, uint32_t failures,
                          int64_t time_left_ms) {
  RetryDecision d;
  const bool retried = failure.status != 0 ? IsRetriedStatus(failure.status)
                                           : failure.transport != TransportError::kTls &&
                                                 failure.transport != TransportError::kBadScheme;
  if (!retried) {
    d.give_up = GiveUp::kFinal;
    return d;
  }
  if (failures >= limits.retries) {
    d.give_up = GiveUp::kRetriesSpent;
    return d;
  }
  std::optional<uint64_t> after;
  if (failure.status != 0 && failure.retry_after) {
    std::optional<std::string_view> date;
    if (failure.date) date = *failure.date;
    after = RetryAfterSeconds(*failure.retry_after, date);
  }
  if (after && *after > limits.max_retry_after_s) {
    d.give_up = GiveUp::kServerWaitTooLong;
    const std::string asked = *after == std::numeric_limits<uint64_t>::max() ? std::string("longer")
                                                                             : std::to_string(*after) + " s";
    d.reason = "the server asked to wait " + asked + " before trying again, more than the " +
               std::to_string(limits.max_retry_after_s) + " s allowed";
    return d;
  }
  d.wait_ms = after ? *after * 1000
                    : std::min<uint64_t>(static_cast<uint64_t>(limits.backoff_ms) << std::min(failures, 30u),
                                         limits.backoff_max_ms);
  if (static_cast<int64_t>(d.wait_ms) >= time_left_ms) {
    d.give_up = GiveUp::kDeadline;
    d.wait_ms = 0;
  }
  return d;
}

}  // namespace pb::net
