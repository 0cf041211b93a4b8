// The one HTTP retry decision (net/http_retry.h), as a table: which statuses and transport failures are retried,
// the backoff, Retry-After as delay-seconds and as an HTTP-date against the answer's Date, a Retry-After longer
// than allowed, the retries spent, the deadline. The transports' own tests (http_policy_test.cc, the push and
// remote tests under tests/js) show each one follows it.
#include <gtest/gtest.h>

#include <limits>

#include "net/http_retry.h"

namespace pb::net {
namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

AttemptFailure Status(int status, std::optional<std::string> retry_after = std::nullopt,
                      std::optional<std::string> date = std::nullopt) {
  return {.status = status, .retry_after = std::move(retry_after), .date = std::move(date)};
}

TEST(HttpRetry, StatusesRetriedAndFinal) {
  const HttpLimits limits;
  for (int status : {408, 429, 500, 502, 503, 504}) {
    RetryDecision d = DecideRetry(limits, Status(status), 0, kForever);
    EXPECT_TRUE(d.retry()) << status;
    EXPECT_EQ(d.wait_ms, 250u) << status;
    EXPECT_TRUE(IsRetriedStatus(status));
  }
  // Not transient: asking again gets the same answer (501 Not Implemented, 505 HTTP Version Not Supported...).
  for (int status : {200, 206, 301, 400, 401, 403, 404, 409, 410, 413, 416, 422, 425, 451, 501, 505, 507, 511}) {
    RetryDecision d = DecideRetry(limits, Status(status, "1"), 0, kForever);
    EXPECT_EQ(d.give_up, GiveUp::kFinal) << status;
    EXPECT_EQ(d.reason, "") << status;
    EXPECT_FALSE(IsRetriedStatus(status));
  }
}

TEST(HttpRetry, TransportFailuresRetriedExceptTlsAndScheme) {
  const HttpLimits limits;
  for (TransportError kind : {TransportError::kResolve, TransportError::kConnect, TransportError::kBroken})
    EXPECT_TRUE(DecideRetry(limits, {.transport = kind}, 0, kForever).retry()) << static_cast<int>(kind);
  for (TransportError kind : {TransportError::kTls, TransportError::kBadScheme})
    EXPECT_EQ(DecideRetry(limits, {.transport = kind}, 0, kForever).give_up, GiveUp::kFinal);
}

TEST(HttpRetry, BackoffDoublesUpToItsCapWithoutJitter) {
  HttpLimits limits;
  limits.retries = 10;
  std::vector<uint64_t> waits;
  for (uint32_t failures = 0; failures < 8; ++failures)
    waits.push_back(DecideRetry(limits, {}, failures, kForever).wait_ms);
  EXPECT_EQ(waits, (std::vector<uint64_t>{250, 500, 1000, 2000, 4000, 8000, 8000, 8000}));
  // The same inputs, the same wait: nothing random.
  EXPECT_EQ(DecideRetry(limits, Status(503), 3, kForever).wait_ms, 2000u);
  EXPECT_EQ(DecideRetry(limits, Status(503), 3, kForever).wait_ms, 2000u);
  limits.backoff_ms = 0;
  EXPECT_EQ(DecideRetry(limits, {}, 5, kForever).wait_ms, 0u);
}

TEST(HttpRetry, RetriesSpent) {
  HttpLimits limits;
  limits.retries = 2;
  EXPECT_TRUE(DecideRetry(limits, Status(503), 1, kForever).retry());
  EXPECT_EQ(DecideRetry(limits, Status(503), 2, kForever).give_up, GiveUp::kRetriesSpent);
  EXPECT_EQ(DecideRetry(limits, {}, 2, kForever).give_up, GiveUp::kRetriesSpent);
  limits.retries = 0;
  EXPECT_EQ(DecideRetry(limits, Status(429, "1"), 0, kForever).give_up, GiveUp::kRetriesSpent);
}

TEST(HttpRetry, RetryAfterSeconds) {
  const HttpLimits limits;
  RetryDecision d = DecideRetry(limits, Status(429, " 3 "), 0, kForever);
  ASSERT_TRUE(d.retry());
  EXPECT_EQ(d.wait_ms, 3000u);  // instead of the 250 ms backoff
  EXPECT_EQ(DecideRetry(limits, Status(503, "0"), 4, kForever).wait_ms, 0u);
  EXPECT_EQ(DecideRetry(limits, Status(503, "10"), 0, kForever).wait_ms, 10'000u);  // max_retry_after_s itself
  // Not a number nor a date: as if absent (the backoff).
  for (const char* junk : {"", "-1", "1.5", "soon", "3 s", "0x10"})
    EXPECT_EQ(DecideRetry(limits, Status(503, junk), 1, kForever).wait_ms, 500u) << junk;
}

TEST(HttpRetry, RetryAfterHttpDateCountsFromTheAnswersDate) {
  const HttpLimits limits;
  const std::string date = "Wed, 21 Oct 2015 07:28:00 GMT";
  RetryDecision d = DecideRetry(limits, Status(503, "Wed, 21 Oct 2015 07:28:07 GMT", date), 0, kForever);
  ASSERT_TRUE(d.retry());
  EXPECT_EQ(d.wait_ms, 7000u);
  // The obsolete forms a recipient must read too: RFC 850 and asctime.
  EXPECT_EQ(DecideRetry(limits, Status(503, "Wednesday, 21-Oct-15 07:28:05 GMT", date), 0, kForever).wait_ms, 5000u);
  EXPECT_EQ(DecideRetry(limits, Status(503, "Wed Oct 21 07:28:02 2015", date), 0, kForever).wait_ms, 2000u);
  // Across a month and a year end.
  EXPECT_EQ(RetryAfterSeconds("Thu, 01 Jan 2026 00:00:03 GMT", "Wed, 31 Dec 2025 23:59:58 GMT"), 5u);
  EXPECT_EQ(RetryAfterSeconds("Sun, 01 Mar 2026 00:00:00 GMT", "Sat, 28 Feb 2026 23:59:59 GMT"), 1u);
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
  // A date already passed: no wait.
  EXPECT_EQ(DecideRetry(limits, Status(503, "Wed, 21 Oct 2015 07:27:00 GMT", date), 0, kForever).wait_ms, 0u);
  // Without the answer's Date (or with one that is not a date) there is nothing to count from: the backoff.
  EXPECT_EQ(DecideRetry(limits, Status(503, "Wed, 21 Oct 2015 07:28:07 GMT"), 0, kForever).wait_ms, 250u);
  EXPECT_EQ(DecideRetry(limits, Status(503, "Wed, 21 Oct 2015 07:28:07 GMT", "yesterday"), 0, kForever).wait_ms, 250u);
  for (const char* bad : {"Wed, 32 Oct 2015 07:28:07 GMT", "Wed, 21 Okt 2015 07:28:07 GMT",
                          "Wed, 21 Oct 2015 25:28:07 GMT", "Wed, 21 Oct 2015 07:28:07 CET", "21 Oct 2015 07:28:07 GMT"})
    EXPECT_FALSE(ParseHttpDate(bad).has_value()) << bad;
}

TEST(HttpRetry, RetryAfterLongerThanAllowedGivesUpAtOnceSayingWhy) {
  const HttpLimits limits;  // max_retry_after_s = 10
  RetryDecision d = DecideRetry(limits, Status(429, "11"), 0, kForever);
  EXPECT_EQ(d.give_up, GiveUp::kServerWaitTooLong);
  EXPECT_EQ(d.reason, "the server asked to wait 11 s before trying again, more than the 10 s allowed");
  d = DecideRetry(limits, Status(503, "Wed, 21 Oct 2015 08:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT"), 0, kForever);
  EXPECT_EQ(d.reason, "the server asked to wait 3600 s before trying again, more than the 10 s allowed");
  d = DecideRetry(limits, Status(503, "99999999999999999999999"), 0, kForever);
  EXPECT_EQ(d.give_up, GiveUp::kServerWaitTooLong);
  EXPECT_EQ(d.reason, "the server asked to wait longer before trying again, more than the 10 s allowed");
}

TEST(HttpRetry, AWaitReachingTheDeadlineIsNotStarted) {
  const HttpLimits limits;
  EXPECT_TRUE(DecideRetry(limits, Status(503), 0, 251).retry());
  EXPECT_EQ(DecideRetry(limits, Status(503), 0, 250).give_up, GiveUp::kDeadline);
  EXPECT_EQ(DecideRetry(limits, Status(503, "5"), 0, 5000).give_up, GiveUp::kDeadline);
  EXPECT_EQ(DecideRetry(limits, Status(503, "0"), 0, 0).give_up, GiveUp::kDeadline);  // the deadline passed
  EXPECT_EQ(DecideRetry(limits, Status(503), 0, 250).reason, "");                     // the attempt's error tells
}

}  // namespace
}  // namespace pb::net
