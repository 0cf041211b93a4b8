// The HTTP policy (net/http_policy.h) driven by a scripted transport: every branch of what is retried and what is
// not, the backoff and Retry-After waits, ETag / size / Content-Range checks, deadlines, the minimum rate, the
// redirect cap and targets, user info, the token's scope and the JSON cap. Time is the test's: nothing sleeps.
#include <gtest/gtest.h>

#include "net/http_policy.h"
#include "net/http_url.h"

namespace pb::net {
namespace {

constexpr const char* kUrl = "https://hub.test/o/r/resolve/main/model.safetensors";

HttpFilePolicy Make(HttpLimits limits = {}, std::string token = "", std::string url = kUrl) {
  auto p = HttpFilePolicy::Open({.url = url,
                                 .label = "hf://o/r/model.safetensors",
                                 .token = std::move(token),
                                 .token_origin = "https://hub.test"},
                                limits);
  EXPECT_TRUE(p.ok()) << p.error().message;
  return std::move(p.value());
}

HttpHead Partial(uint64_t a, uint64_t b, uint64_t total, std::string etag = "\"e1\"") {
  HttpHead h;
  h.status = 206;
  h.content_range = "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(total);
  h.content_length = std::to_string(b - a + 1);
  h.etag = std::move(etag);
  return h;
}

HttpHead StatusHead(int status, std::optional<std::string> retry_after = std::nullopt) {
  HttpHead h;
  h.status = status;
  h.retry_after = std::move(retry_after);
  h.error_message = "nope";
  return h;
}

HttpHead Redirect(std::string location, int status = 302) {
  HttpHead h;
  h.status = status;
  h.location = std::move(location);
  return h;
}

HttpStep Send(HttpFilePolicy& p, int64_t now) {
  HttpStep s = p.Next(now);
  EXPECT_EQ(s.action, HttpAction::kSend) << (s.error ? s.error->message : "");
  return s;
}

std::string FailMessage(HttpFilePolicy& p, int64_t now) {
  HttpStep s = p.Next(now);
  EXPECT_EQ(s.action, HttpAction::kFail);
  return s.error ? s.error->message : "";
}

TEST(HttpUrl, OriginSchemeUserInfoAndResolution) {
  EXPECT_EQ(UrlOrigin("HTTPS://Hub.Test:443/x?y"), "https://hub.test");
  EXPECT_EQ(UrlOrigin("http://u:p@h:8080/"), "http://h:8080");
  EXPECT_EQ(UrlOrigin("file:///etc/passwd"), "file://");
  EXPECT_EQ(UrlOrigin("/relative"), "");
  EXPECT_TRUE(UrlHasUserInfo("http://user:pw@h/x"));
  EXPECT_TRUE(UrlHasUserInfo("https://user@h/x"));
  EXPECT_FALSE(UrlHasUserInfo("https://h/x@y"));
  EXPECT_EQ(ResolveUrl("http://h:1/a/b/c?q", "/cdn/x").value(), "http://h:1/cdn/x");
  EXPECT_EQ(ResolveUrl("http://h/a/b/c", "d/e#frag").value(), "http://h/a/b/d/e");
  EXPECT_EQ(ResolveUrl("http://h/a/b/c", "../d").value(), "http://h/a/d");
  EXPECT_EQ(ResolveUrl("https://h/a", "//other/x").value(), "https://other/x");
  EXPECT_EQ(ResolveUrl("https://h/a", "http://x/y").value(), "http://x/y");
  EXPECT_EQ(ResolveUrl("https://h/a/b", "?v=1").value(), "https://h/a/b?v=1");
  EXPECT_FALSE(ResolveUrl("not a url", "/x"));
}

TEST(HttpPolicy, OneRangedRequestReadsTheBytes) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 100, 0);
  HttpStep s = Send(p, 0);
  EXPECT_EQ(s.request.url, kUrl);
  EXPECT_EQ(s.request.range, "bytes=0-99");
  EXPECT_EQ(s.request.authorization, "");
  EXPECT_EQ(s.deadline_ms, 10'000);  // the idle deadline comes first
  p.OnHead(5, Partial(0, 99, 1000));
  EXPECT_EQ(p.Next(5).action, HttpAction::kRead);
  BodySlice a = p.OnBody(6, 60);
  EXPECT_EQ(a.skip, 0u);
  EXPECT_EQ(a.take, 60u);
  EXPECT_EQ(p.OnBody(7, 40).take, 40u);
  EXPECT_EQ(p.Next(7).action, HttpAction::kDone);
  EXPECT_EQ(p.size().value(), 1000u);
  EXPECT_EQ(p.etag().value(), "\"e1\"");
  EXPECT_EQ(p.requests(), 1u);
}

TEST(HttpPolicy, RefusesUserInfoAndOtherSchemesUpFront) {
  for (const char* url : {"https://user:pw@hub.test/x", "https://user@hub.test/x", "file:///etc/passwd", "ftp://h/x"}) {
    auto p = HttpFilePolicy::Open({.url = url, .label = url, .token = "", .token_origin = ""}, {});
    ASSERT_FALSE(p.ok()) << url;
    EXPECT_EQ(p.error().code, ErrorCode::InvalidArgument);
  }
  EXPECT_EQ(HttpFilePolicy::Open({.url = "https://user@h/x", .label = "L", .token = "", .token_origin = ""}, {})
                .error()
                .message,
            "`L`: URLs with user info (user:password@) are refused; use a token instead");
}

TEST(HttpPolicy, TokenGoesToTheTokenOriginOnlyOnEveryHop) {
  HttpFilePolicy p = Make({}, "hf_secret");
  p.BeginRead(0, 10, 0);
  EXPECT_EQ(Send(p, 0).request.authorization, "Bearer hf_secret");
  p.OnHead(1, Redirect("/cdn/abc"));  // same origin: still sent
  HttpStep same = Send(p, 1);
  EXPECT_EQ(same.request.url, "https://hub.test/cdn/abc");
  EXPECT_EQ(same.request.authorization, "Bearer hf_secret");
  p.OnHead(2, Redirect("https://cdn.other.test/blob"));  // another origin: never
  HttpStep other = Send(p, 2);
  EXPECT_EQ(other.request.url, "https://cdn.other.test/blob");
  EXPECT_EQ(other.request.authorization, "");
  p.OnHead(3, Redirect("http://hub.test/x"));  // another scheme is another origin
  EXPECT_EQ(Send(p, 3).request.authorization, "");
  p.OnHead(4, Partial(0, 9, 10));
  p.OnBody(4, 10);
  EXPECT_EQ(p.Next(4).action, HttpAction::kDone);
  // A URL on another origin than the endpoint's gets no token at all.
  HttpFilePolicy q = Make({}, "hf_secret", "https://elsewhere.test/f");
  q.BeginRead(0, 10, 0);
  EXPECT_EQ(Send(q, 0).request.authorization, "");
}

TEST(HttpPolicy, RetriesServerErrorsWithExponentialBackoffThenFails) {
  HttpLimits limits;
  limits.retries = 3;
  HttpFilePolicy p = Make(limits);
  p.BeginRead(0, 10, 0);
  int64_t now = 0;
  std::vector<int64_t> waits;
  for (int i = 0; i < 3; ++i) {
    Send(p, now);
    p.OnHead(now, StatusHead(503));
    HttpStep w = p.Next(now);
    ASSERT_EQ(w.action, HttpAction::kWait);
    waits.push_back(w.deadline_ms - now);
    EXPECT_EQ(p.Next(w.deadline_ms - 1).action, HttpAction::kWait);  // not before the wait ends
    now = w.deadline_ms;
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{250, 500, 1000}));
  Send(p, now);
  p.OnHead(now, StatusHead(503));
  EXPECT_EQ(FailMessage(p, now), "cannot open `hf://o/r/model.safetensors`: HTTP 503: nope");
  EXPECT_EQ(p.failed_status(), 503);
  EXPECT_EQ(p.requests(), 4u);
}

TEST(HttpPolicy, BackoffIsCapped) {
  HttpLimits limits;
  limits.retries = 10;
  HttpFilePolicy p = Make(limits);
  p.BeginRead(0, 10, 0);
  int64_t now = 0, last = 0;
  for (int i = 0; i < 8; ++i) {
    Send(p, now);
    p.OnTransportError(now, TransportError::kConnect);
    HttpStep w = p.Next(now);
    ASSERT_EQ(w.action, HttpAction::kWait);
    last = w.deadline_ms - now;
    now = w.deadline_ms;
  }
  EXPECT_EQ(last, 8000);
}

TEST(HttpPolicy, RetryAfterIsHonouredUpToItsCap) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  p.OnHead(0, StatusHead(429, "3"));
  HttpStep w = p.Next(0);
  ASSERT_EQ(w.action, HttpAction::kWait);
  EXPECT_EQ(w.deadline_ms, 3000);
  Send(p, 3000);
  p.OnHead(3000, StatusHead(503, "3600"));  // longer than max_retry_after_s: fail now instead of waiting an hour
  EXPECT_EQ(FailMessage(p, 3000), "cannot open `hf://o/r/model.safetensors`: HTTP 503: nope (the server asked to wait "
                                  "3600 s before trying again, more than the 10 s allowed)");
}

// The read follows the one retry decision (net/http_retry.h; its table is http_retry_test.cc): a 501 is final, and
// a Retry-After given as an HTTP-date is waited, counted from the answer's Date.
TEST(HttpPolicy, FollowsTheRetryDecision) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  p.OnHead(0, StatusHead(501));
  EXPECT_EQ(FailMessage(p, 0), "cannot open `hf://o/r/model.safetensors`: HTTP 501: nope");
  HttpFilePolicy q = Make();
  q.BeginRead(0, 10, 0);
  Send(q, 0);
  HttpHead h = StatusHead(503, "Wed, 21 Oct 2015 07:28:04 GMT");
  h.date = "Wed, 21 Oct 2015 07:28:00 GMT";
  q.OnHead(0, h);
  HttpStep w = q.Next(0);
  ASSERT_EQ(w.action, HttpAction::kWait);
  EXPECT_EQ(w.deadline_ms, 4000);
}

TEST(HttpPolicy, FourHundredsAreNotRetriedExcept408And429) {
  for (int status : {400, 401, 403, 404, 410, 451}) {
    HttpFilePolicy p = Make();
    p.BeginRead(0, 10, 0);
    Send(p, 0);
    p.OnHead(0, StatusHead(status));
    EXPECT_EQ(p.Next(0).action, HttpAction::kFail) << status;
    EXPECT_EQ(p.failed_status(), status);
  }
  for (int status : {408, 429, 500, 502, 504}) {
    HttpFilePolicy p = Make();
    p.BeginRead(0, 10, 0);
    Send(p, 0);
    p.OnHead(0, StatusHead(status));
    EXPECT_EQ(p.Next(0).action, HttpAction::kWait) << status;
  }
  HttpFilePolicy p = Make();
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  p.OnHead(0, StatusHead(401));
  EXPECT_EQ(FailMessage(p, 0), "cannot open `hf://o/r/model.safetensors`: HTTP 401: nope (no token was sent)");
}

TEST(HttpPolicy, TransportErrorsRetriedOrNotByKind) {
  for (auto kind : {TransportError::kResolve, TransportError::kConnect, TransportError::kBroken}) {
    HttpFilePolicy p = Make();
    p.BeginRead(0, 10, 0);
    Send(p, 0);
    p.OnTransportError(0, kind);
    EXPECT_EQ(p.Next(0).action, HttpAction::kWait);
  }
  for (auto kind : {TransportError::kTls, TransportError::kBadScheme}) {
    HttpFilePolicy p = Make();
    p.BeginRead(0, 10, 0);
    Send(p, 0);
    p.OnTransportError(0, kind);
    EXPECT_EQ(p.Next(0).action, HttpAction::kFail);
  }
  HttpFilePolicy p = Make({.retries = 0});
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  p.OnTransportError(0, TransportError::kConnect);
  EXPECT_EQ(FailMessage(p, 0), "cannot open `hf://o/r/model.safetensors`: could not connect to `hub.test`");
  // The host is the one asked: an hf:// label does not show HF_ENDPOINT's, and a redirect may lead elsewhere.
  HttpFilePolicy named = Make({.retries = 0}, "", "http://Nohost.Invalid:8080/o/r/resolve/main/model.safetensors");
  named.BeginRead(0, 10, 0);
  Send(named, 0);
  named.OnTransportError(0, TransportError::kResolve);
  EXPECT_EQ(FailMessage(named, 0),
            "cannot open `hf://o/r/model.safetensors`: the host name `nohost.invalid:8080` did not resolve");
  // A hostile host of 100,000 characters is clipped in the message, as every echoed input is.
  for (auto kind : {TransportError::kResolve, TransportError::kConnect}) {
    HttpFilePolicy huge =
        Make({.retries = 0}, "", "http://" + std::string(100000, 'a') + "/o/r/resolve/main/m.safetensors");
    huge.BeginRead(0, 10, 0);
    Send(huge, 0);
    huge.OnTransportError(0, kind);
    EXPECT_LT(FailMessage(huge, 0).size(), 1000u);
  }
}

TEST(HttpPolicy, TruncatedBodyResumesAtTheByteReached) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 100, 0);
  Send(p, 0);
  p.OnHead(0, Partial(0, 99, 1000));
  EXPECT_EQ(p.OnBody(1, 30).take, 30u);
  p.OnTransportError(2, TransportError::kBroken);  // curl's partial file / undici's "terminated"
  HttpStep w = p.Next(2);
  ASSERT_EQ(w.action, HttpAction::kWait);
  HttpStep s = Send(p, w.deadline_ms);
  EXPECT_EQ(s.request.range, "bytes=30-99");
  p.OnHead(w.deadline_ms, Partial(30, 99, 1000));
  EXPECT_EQ(p.OnBody(w.deadline_ms, 70).take, 70u);
  EXPECT_EQ(p.Next(w.deadline_ms).action, HttpAction::kDone);
  // A clean end before Content-Range's end is the same failure, with the same message once retries are spent.
  HttpFilePolicy q = Make({.retries = 0});
  q.BeginRead(0, 100, 0);
  Send(q, 0);
  q.OnHead(0, Partial(0, 99, 1000));
  q.OnBody(0, 10);
  q.OnBodyEnd(0);
  EXPECT_EQ(FailMessage(q, 0), "cannot read `hf://o/r/model.safetensors`: the connection closed at byte 10 of 100");
}

TEST(HttpPolicy, ProgressResetsTheFailureCount) {
  HttpFilePolicy p = Make({.retries = 1});
  p.BeginRead(0, 100, 0);
  int64_t now = 0;
  for (uint64_t at = 0; at < 100; at += 10) {  // ten cuts, each after progress: never more than one failure in a row
    HttpStep s = Send(p, now);
    EXPECT_EQ(s.request.range, "bytes=" + std::to_string(at) + "-99");
    p.OnHead(now, Partial(at, 99, 1000));
    p.OnBody(now, 10);
    if (at + 10 == 100) break;
    p.OnTransportError(now, TransportError::kBroken);
    now = p.Next(now).deadline_ms;
  }
  EXPECT_EQ(p.Next(now).action, HttpAction::kDone);
}

TEST(HttpPolicy, WrongContentRangeIsNotRetried) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 100, 0);
  Send(p, 0);
  p.OnHead(0, Partial(1, 100, 1000));
  EXPECT_EQ(FailMessage(p, 0),
            "cannot read `hf://o/r/model.safetensors`: wrong Content-Range `bytes 1-100/1000` in answer to bytes=0-99");
  HttpFilePolicy q = Make();
  q.BeginRead(0, 100, 0);
  Send(q, 0);
  HttpHead h = Partial(0, 99, 1000);
  h.content_length = "99";
  q.OnHead(0, h);
  EXPECT_EQ(q.Next(0).action, HttpAction::kFail);
  // More bytes than the Content-Range announced.
  HttpFilePolicy r = Make();
  r.BeginRead(0, 100, 0);
  Send(r, 0);
  r.OnHead(0, Partial(0, 99, 1000));
  r.OnBody(0, 101);
  EXPECT_EQ(FailMessage(r, 0),
            "cannot read `hf://o/r/model.safetensors`: the server sent more bytes than its Content-Range");
}

TEST(HttpPolicy, EtagOrSizeChangeFailsWithoutRetry) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  p.OnHead(0, Partial(0, 9, 1000, "W/\"e1\""));  // weak and strong forms compare equal
  p.OnBody(0, 10);
  ASSERT_EQ(p.Next(0).action, HttpAction::kDone);
  p.BeginRead(500, 510, 1);
  Send(p, 1);
  p.OnHead(1, Partial(500, 509, 1000, "\"e1\""));
  p.OnBody(1, 10);
  ASSERT_EQ(p.Next(1).action, HttpAction::kDone);
  p.BeginRead(600, 610, 2);
  Send(p, 2);
  p.OnHead(2, Partial(600, 609, 1000, "\"e2\""));
  EXPECT_EQ(FailMessage(p, 2), "`hf://o/r/model.safetensors` changed while being read (ETag \"e1\" became \"e2\")");
  HttpFilePolicy q = Make();
  q.BeginRead(0, 10, 0);
  Send(q, 0);
  q.OnHead(0, Partial(0, 9, 1000));
  q.OnBody(0, 10);
  q.BeginRead(20, 30, 0);
  Send(q, 0);
  q.OnHead(0, Partial(20, 29, 999));
  EXPECT_EQ(FailMessage(q, 0), "`hf://o/r/model.safetensors` changed while being read (size 1000 became 999)");
}

TEST(HttpPolicy, ServerIgnoringRangeIsSkippedToThePosition) {
  HttpFilePolicy p = Make();
  p.BeginRead(100, 150, 0);
  Send(p, 0);
  HttpHead h;
  h.status = 200;
  h.content_length = "1000";
  p.OnHead(0, h);
  BodySlice a = p.OnBody(0, 64);
  EXPECT_EQ(a.skip, 64u);
  EXPECT_EQ(a.take, 0u);
  BodySlice b = p.OnBody(0, 64);  // bytes 64..128: skip 36, take 28
  EXPECT_EQ(b.skip, 36u);
  EXPECT_EQ(b.take, 28u);
  BodySlice c = p.OnBody(0, 64);  // 128..192: take 22, the rest stays unread
  EXPECT_EQ(c.skip, 0u);
  EXPECT_EQ(c.take, 22u);
  EXPECT_EQ(p.Next(0).action, HttpAction::kDone);
  // The next read continues the open body instead of sending a new request.
  p.BeginRead(150, 170, 0);
  EXPECT_EQ(p.Next(0).action, HttpAction::kRead);
  EXPECT_EQ(p.OnBody(0, 42).take, 20u);
  EXPECT_EQ(p.requests(), 1u);
  // A read behind the body's position needs a new request.
  p.BeginRead(0, 10, 0);
  EXPECT_EQ(Send(p, 0).request.range, "bytes=0-9");
}

TEST(HttpPolicy, Unsatisfiable416TellsTheSize) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 65536, 0);
  Send(p, 0);
  HttpHead h;
  h.status = 416;
  h.content_range = "bytes */0";
  p.OnHead(0, h);
  EXPECT_EQ(p.Next(0).action, HttpAction::kDone);
  EXPECT_EQ(p.size().value(), 0u);
}

TEST(HttpPolicy, UnknownLengthBodyEndsTheFile) {
  HttpFilePolicy p = Make();
  p.BeginReadWhole(0);
  EXPECT_EQ(Send(p, 0).request.range, "bytes=0-67108864");
  HttpHead h;
  h.status = 200;
  h.content_encoding = "gzip";
  h.content_length = "5";
  p.OnHead(0, h);
  EXPECT_EQ(p.OnBody(0, 12).take, 12u);
  p.OnBodyEnd(0);
  EXPECT_EQ(p.Next(0).action, HttpAction::kDone);
  EXPECT_EQ(p.size().value(), 12u);
}

TEST(HttpPolicy, JsonCapFailsFromTheSizeOrTheBytes) {
  HttpFilePolicy p = Make({.max_json_bytes = 100});
  p.BeginReadWhole(0);
  EXPECT_EQ(Send(p, 0).request.range, "bytes=0-100");
  p.OnHead(0, Partial(0, 100, 5000));
  EXPECT_EQ(FailMessage(p, 0),
            "`hf://o/r/model.safetensors` is 5000 bytes, more than the cap of 100 for a JSON file read whole "
            "(PB_HTTP_MAX_JSON_BYTES)");
  HttpFilePolicy q = Make({.max_json_bytes = 100});
  q.BeginReadWhole(0);
  Send(q, 0);
  HttpHead h;
  h.status = 200;  // no length: the cap is found from the bytes
  q.OnHead(0, h);
  EXPECT_EQ(q.OnBody(0, 500).take, 101u);
  EXPECT_EQ(FailMessage(q, 0),
            "`hf://o/r/model.safetensors` is larger than 100 bytes, the cap for a JSON file read whole "
            "(PB_HTTP_MAX_JSON_BYTES)");
  HttpFilePolicy r = Make({.max_json_bytes = 100});
  r.BeginReadWhole(0);
  Send(r, 0);
  r.OnHead(0, Partial(0, 99, 100));
  r.OnBody(0, 100);
  EXPECT_EQ(r.Next(0).action, HttpAction::kDone);
}

TEST(HttpPolicy, RedirectsAreCappedAndTheirTargetsChecked) {
  HttpFilePolicy p = Make({.max_redirects = 3});
  p.BeginRead(0, 10, 0);
  for (int i = 0; i < 3; ++i) {
    Send(p, 0);
    p.OnHead(0, Redirect("/loop"));
  }
  Send(p, 0);
  p.OnHead(0, Redirect("/loop"));
  EXPECT_EQ(FailMessage(p, 0),
            "cannot open `hf://o/r/model.safetensors`: more than 3 redirects (PB_HTTP_MAX_REDIRECTS)");
  EXPECT_EQ(p.requests(), 4u);

  HttpFilePolicy q = Make();
  q.BeginRead(0, 10, 0);
  Send(q, 0);
  q.OnHead(0, Redirect("file:///etc/passwd"));
  EXPECT_EQ(FailMessage(q, 0),
            "cannot open `hf://o/r/model.safetensors`: redirected to `file:`, which is not an http(s) URL");

  HttpFilePolicy r = Make();
  r.BeginRead(0, 10, 0);
  Send(r, 0);
  r.OnHead(0, Redirect("https://user:pw@evil.test/x"));
  EXPECT_EQ(FailMessage(r, 0),
            "cannot open `hf://o/r/model.safetensors`: redirected to a URL with user info, which is refused");

  HttpFilePolicy s = Make();
  s.BeginRead(0, 10, 0);
  Send(s, 0);
  HttpHead h;
  h.status = 301;
  s.OnHead(0, h);
  EXPECT_EQ(FailMessage(s, 0), "cannot open `hf://o/r/model.safetensors`: HTTP 301 without a Location");

  // A transport that followed redirects itself reports where it landed: the same checks apply.
  HttpFilePolicy t = Make();
  t.BeginRead(0, 10, 0);
  Send(t, 0);
  HttpHead landed = Partial(0, 9, 10);
  landed.final_url = "ftp://elsewhere/x";
  t.OnHead(0, landed);
  EXPECT_EQ(t.Next(0).action, HttpAction::kFail);
}

TEST(HttpPolicy, RedirectChainRestartsFromTheOriginalUrlAfterAFailure) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  HttpHead r = Redirect("https://cdn.test/blob");
  r.repo_commit = "abc123";
  p.OnHead(0, r);
  EXPECT_EQ(Send(p, 0).request.url, "https://cdn.test/blob");
  p.OnHead(0, StatusHead(503));
  HttpStep w = p.Next(0);
  EXPECT_EQ(Send(p, w.deadline_ms).request.url, kUrl);
  EXPECT_EQ(p.commit().value(), "abc123");  // the Hub names the commit on the resolve hop
}

TEST(HttpPolicy, LaterRangesGoStraightToWhereTheRedirectLanded) {
  HttpFilePolicy p = Make({}, "hf_tok");
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  p.OnHead(0, Redirect("https://cdn.test/blob?sig=1"));
  EXPECT_EQ(Send(p, 0).request.authorization, "");  // another origin: no token
  p.OnHead(0, Partial(0, 9, 1000));
  EXPECT_EQ(p.OnBody(0, 10).take, 10u);
  EXPECT_EQ(p.Next(0).action, HttpAction::kDone);
  // The next read of the file: one request, at the CDN URL, still without the token; the ETag still pinned.
  p.BeginRead(500, 600, 1);
  HttpStep s = Send(p, 1);
  EXPECT_EQ(s.request.url, "https://cdn.test/blob?sig=1");
  EXPECT_EQ(s.request.authorization, "");
  p.OnHead(1, Partial(500, 599, 1000));
  EXPECT_EQ(p.OnBody(1, 100).take, 100u);
  EXPECT_EQ(p.Next(1).action, HttpAction::kDone);
  EXPECT_EQ(p.requests(), 3u);  // resolve + CDN, then CDN only
  // A later answer there with another ETag is the file changing, as anywhere.
  p.BeginRead(700, 710, 2);
  Send(p, 2);
  p.OnHead(2, Partial(700, 709, 1000, "\"e2\""));
  EXPECT_NE(FailMessage(p, 2).find("changed while being read"), std::string::npos);
}

// A first read of bytes [0, 10) of a 1000-byte file, redirected to the CDN URL https://cdn.test/blob?sig=old.
void LandAtCdn(HttpFilePolicy& p) {
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  p.OnHead(0, Redirect("https://cdn.test/blob?sig=old"));
  Send(p, 0);
  p.OnHead(0, Partial(0, 9, 1000));
  p.OnBody(0, 10);
}

TEST(HttpPolicy, AFailureAtTheLandedUrlGoesBackThroughTheStartUrlAtOnce) {
  HttpFilePolicy p = Make({.retries = 0});
  LandAtCdn(p);
  EXPECT_EQ(p.Next(0).action, HttpAction::kDone);
  // The signed URL expired: 403 there is not the read's failure (even with no retries left); the start URL is
  // asked again at once, and its redirect gives the new CDN URL.
  p.BeginRead(10, 20, 1);
  EXPECT_EQ(Send(p, 1).request.url, "https://cdn.test/blob?sig=old");
  p.OnHead(1, StatusHead(403));
  EXPECT_EQ(Send(p, 1).request.url, kUrl);
  p.OnHead(1, Redirect("https://cdn.test/blob?sig=new"));
  EXPECT_EQ(Send(p, 1).request.url, "https://cdn.test/blob?sig=new");
  p.OnHead(1, Partial(10, 19, 1000));
  EXPECT_EQ(p.OnBody(1, 10).take, 10u);
  EXPECT_EQ(p.Next(1).action, HttpAction::kDone);
  // A CDN that keeps failing costs one free attempt per landing, never a loop: with no retries, a failure reached
  // through the start URL's redirect is the read's.
  p.BeginRead(20, 30, 2);
  EXPECT_EQ(Send(p, 2).request.url, "https://cdn.test/blob?sig=new");
  p.OnHead(2, StatusHead(503));
  EXPECT_EQ(Send(p, 2).request.url, kUrl);
  p.OnHead(2, Redirect("https://cdn.test/blob?sig=new"));
  Send(p, 2);
  p.OnHead(2, StatusHead(503));
  EXPECT_NE(FailMessage(p, 2).find("HTTP 503"), std::string::npos);
}

TEST(HttpPolicy, ABodyCutShortAtTheLandedUrlIsRetriedThereAndCounted) {
  HttpFilePolicy p = Make({.retries = 1, .backoff_ms = 1});
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  p.OnHead(0, Redirect("https://cdn.test/blob"));
  Send(p, 0);
  p.OnHead(0, Partial(0, 9, 1000));
  p.OnBody(0, 10);
  p.BeginRead(100, 200, 1);
  EXPECT_EQ(Send(p, 1).request.url, "https://cdn.test/blob");
  p.OnHead(1, Partial(100, 199, 1000));
  EXPECT_EQ(p.OnBody(1, 30).take, 30u);
  p.OnTransportError(1, TransportError::kBroken);
  HttpStep w = p.Next(1);
  ASSERT_EQ(w.action, HttpAction::kWait);  // a counted retry, after the backoff, at the same CDN URL
  HttpStep s = Send(p, w.deadline_ms);
  EXPECT_EQ(s.request.url, "https://cdn.test/blob");
  EXPECT_EQ(s.request.range, "bytes=130-199");
}

TEST(HttpPolicy, ReadersOfOneFileShareItsEtagSizeAndLandedUrl) {
  HttpFilePolicy p = Make({}, "hf_tok");
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  HttpHead r = Redirect("https://cdn.test/blob?sig=1");
  r.repo_commit = "abc123";
  p.OnHead(0, r);
  EXPECT_FALSE(p.ParallelReads());  // nothing pinned yet: a second reader would resolve again
  Send(p, 0);
  p.OnHead(0, Partial(0, 9, 1000));
  EXPECT_TRUE(p.ParallelReads());
  p.OnBody(0, 10);
  // Two more readers, each with a read in flight at the same time: both go straight to the CDN URL, no token.
  HttpFilePolicy a = p.Reader(), b = p.Reader();
  a.BeginRead(100, 200, 1);
  b.BeginRead(200, 300, 1);
  HttpStep sa = Send(a, 1), sb = Send(b, 1);
  EXPECT_EQ(sa.request.url, "https://cdn.test/blob?sig=1");
  EXPECT_EQ(sb.request.url, "https://cdn.test/blob?sig=1");
  EXPECT_EQ(sa.request.range, "bytes=100-199");
  EXPECT_EQ(sb.request.range, "bytes=200-299");
  EXPECT_EQ(sa.request.authorization, "");
  EXPECT_EQ(b.commit().value(), "abc123");
  EXPECT_EQ(b.size().value(), 1000u);
  a.OnHead(1, Partial(100, 199, 1000));
  EXPECT_EQ(a.OnBody(1, 100).take, 100u);
  EXPECT_EQ(a.Next(1).action, HttpAction::kDone);
  // The file changed under b: its answer carries another ETag than the one p pinned.
  b.OnHead(1, Partial(200, 299, 1000, "\"e2\""));
  EXPECT_NE(FailMessage(b, 1).find("changed while being read (ETag \"e1\" became \"e2\")"), std::string::npos);
  EXPECT_EQ(p.requests(), 4u);  // resolve + CDN, then one CDN request per reader: counted for the file
  // A size change is seen by every reader as well.
  HttpFilePolicy c = p.Reader();
  c.BeginRead(300, 310, 2);
  Send(c, 2);
  c.OnHead(2, Partial(300, 309, 999));
  EXPECT_NE(FailMessage(c, 2).find("changed while being read (size 1000 became 999)"), std::string::npos);
}

TEST(HttpPolicy, AReaderKeepsTheLandedUrlAnotherFoundMeanwhile) {
  HttpFilePolicy p = Make({.retries = 0});
  LandAtCdn(p);
  HttpFilePolicy a = p.Reader(), b = p.Reader();
  a.BeginRead(10, 20, 1);
  b.BeginRead(20, 30, 1);
  EXPECT_EQ(Send(a, 1).request.url, "https://cdn.test/blob?sig=old");
  EXPECT_EQ(Send(b, 1).request.url, "https://cdn.test/blob?sig=old");
  // The signed URL expired: a goes back through the start URL and lands at a new one...
  a.OnHead(1, StatusHead(403));
  EXPECT_EQ(Send(a, 1).request.url, kUrl);
  a.OnHead(1, Redirect("https://cdn.test/blob?sig=new"));
  EXPECT_EQ(Send(a, 1).request.url, "https://cdn.test/blob?sig=new");
  a.OnHead(1, Partial(10, 19, 1000));
  EXPECT_EQ(a.OnBody(1, 10).take, 10u);
  // ...then b's 403 from the old one does not drop the new one: b asks again at once, there (no attempt counted).
  b.OnHead(1, StatusHead(403));
  EXPECT_EQ(Send(b, 1).request.url, "https://cdn.test/blob?sig=new");
  b.OnHead(1, Partial(20, 29, 1000));
  EXPECT_EQ(b.OnBody(1, 10).take, 10u);
  EXPECT_EQ(b.Next(1).action, HttpAction::kDone);
  HttpFilePolicy c = p.Reader();
  c.BeginRead(30, 40, 2);
  EXPECT_EQ(Send(c, 2).request.url, "https://cdn.test/blob?sig=new");
}

TEST(HttpPolicy, ALandingWhoseAnswerFailsItsChecksIsNotKept) {
  for (bool wrong_range : {false, true}) {
    HttpFilePolicy p = Make({.retries = 0});
    LandAtCdn(p);
    HttpFilePolicy b = p.Reader();
    b.BeginRead(10, 20, 1);
    EXPECT_EQ(Send(b, 1).request.url, "https://cdn.test/blob?sig=old");
    b.OnHead(1, StatusHead(403));  // expired: the old landing is dropped, b resolves again
    EXPECT_EQ(Send(b, 1).request.url, kUrl);
    b.OnHead(1, Redirect("https://cdn.test/blob?sig=new"));
    EXPECT_EQ(Send(b, 1).request.url, "https://cdn.test/blob?sig=new");
    // The answer there is of a changed file (another ETag) or for other bytes: b fails, and the URL it came
    // from is no landing for the file's next reads, which resolve again.
    b.OnHead(1, wrong_range ? Partial(0, 9, 1000) : Partial(10, 19, 1000, "\"e2\""));
    EXPECT_NE(FailMessage(b, 1).find(wrong_range ? "wrong Content-Range" : "changed while being read"),
              std::string::npos);
    HttpFilePolicy c = p.Reader();
    c.BeginRead(30, 40, 2);
    EXPECT_EQ(Send(c, 2).request.url, kUrl) << (wrong_range ? "wrong range" : "changed ETag");
  }
}

TEST(HttpPolicy, NoParallelReadsFromAServerThatIgnoresRange) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 10, 0);
  Send(p, 0);
  HttpHead h;
  h.status = 200;
  h.content_length = "1000";
  h.etag = "\"e1\"";
  p.OnHead(0, h);
  EXPECT_FALSE(p.ParallelReads());
}

TEST(HttpPolicy, IdleDeadlineFailsTheAttemptAndIsRetried) {
  HttpFilePolicy p = Make({.retries = 1, .backoff_ms = 10, .idle_ms = 500});
  p.BeginRead(0, 10, 0);
  HttpStep s = Send(p, 0);
  EXPECT_EQ(s.deadline_ms, 500);
  p.OnTimer(499);  // early: nothing happens
  EXPECT_EQ(p.Next(499).action, HttpAction::kRead);
  p.OnTimer(500);
  HttpStep w = p.Next(500);
  ASSERT_EQ(w.action, HttpAction::kWait);
  EXPECT_EQ(w.deadline_ms, 510);
  Send(p, 510);
  p.OnHead(600, Partial(0, 9, 10));
  EXPECT_EQ(p.deadline_ms(), 1100);  // the head was progress
  p.OnTimer(1100);
  EXPECT_EQ(FailMessage(p, 1100),
            "cannot read `hf://o/r/model.safetensors`: no data at byte 0 for 500 ms (PB_HTTP_IDLE_MS)");
  HttpFilePolicy q = Make({.retries = 0, .idle_ms = 500});
  q.BeginRead(0, 10, 0);
  Send(q, 0);
  q.OnTimer(500);
  EXPECT_EQ(FailMessage(q, 500), "cannot open `hf://o/r/model.safetensors`: no answer for 500 ms (PB_HTTP_IDLE_MS)");
}

TEST(HttpPolicy, TotalDeadlineBoundsTheWholeRead) {
  HttpFilePolicy p = Make({.retries = 100, .backoff_ms = 100, .idle_ms = 400, .total_ms = 1000});
  p.BeginRead(0, 10, 0);
  int64_t now = 0;
  int attempts = 0;
  for (;;) {
    HttpStep s = p.Next(now);
    if (s.action == HttpAction::kFail) {
      EXPECT_EQ(s.error->message, "cannot open `hf://o/r/model.safetensors`: no answer for 400 ms (PB_HTTP_IDLE_MS)");
      break;
    }
    if (s.action == HttpAction::kSend) ++attempts;
    now = s.deadline_ms;
    if (s.action != HttpAction::kWait) p.OnTimer(now);
    ASSERT_LE(now, 1000);
  }
  EXPECT_EQ(attempts, 2);  // 0-400, wait 100, 500-900, then a 200 ms wait would pass the deadline
  // A body still flowing when the read's deadline passes fails, not retried.
  HttpFilePolicy q = Make({.idle_ms = 400, .total_ms = 1000, .min_rate = 0});
  q.BeginRead(0, 1000, 0);
  Send(q, 0);
  q.OnHead(0, Partial(0, 999, 1000));
  for (int64_t t = 100; t < 1000; t += 100) q.OnBody(t, 1);
  EXPECT_EQ(q.deadline_ms(), 1000);
  q.OnTimer(1000);
  EXPECT_EQ(FailMessage(q, 1000),
            "cannot read `hf://o/r/model.safetensors`: the read did not finish within 1000 ms (PB_HTTP_TOTAL_MS)");
}

TEST(HttpPolicy, MinimumRatePerWindow) {
  HttpFilePolicy p = Make({.retries = 0, .idle_ms = 10'000, .min_rate = 100, .rate_window_ms = 1000});
  p.BeginRead(0, 100'000, 0);
  Send(p, 0);
  p.OnHead(0, Partial(0, 99'999, 100'000));
  p.OnBody(500, 150);  // 150 B in the first second: enough
  EXPECT_EQ(p.deadline_ms(), 1000);
  p.OnTimer(1000);
  EXPECT_EQ(p.Next(1000).action, HttpAction::kRead);
  p.OnBody(1500, 50);  // 50 B in the next: too slow
  p.OnTimer(2000);
  EXPECT_EQ(FailMessage(p, 2000),
            "cannot read `hf://o/r/model.safetensors`: slower than 100 B/s for 1000 ms at byte 200 (PB_HTTP_MIN_RATE)");
  // A slow attempt that brought bytes still counts as a failure: a trickling server is given up on.
  HttpFilePolicy t = Make({.retries = 1, .idle_ms = 10'000, .min_rate = 100, .rate_window_ms = 1000});
  t.BeginRead(0, 100'000, 0);
  Send(t, 0);
  t.OnHead(0, Partial(0, 99'999, 100'000));
  t.OnBody(500, 10);
  t.OnTimer(1000);
  HttpStep w = t.Next(1000);
  ASSERT_EQ(w.action, HttpAction::kWait);
  EXPECT_EQ(Send(t, w.deadline_ms).request.range, "bytes=10-99999");
  t.OnHead(w.deadline_ms, Partial(10, 99'999, 100'000));
  t.OnBody(w.deadline_ms + 100, 10);
  t.OnTimer(w.deadline_ms + 1000);
  EXPECT_EQ(t.Next(w.deadline_ms + 1000).action, HttpAction::kFail);
  // A rate of 0 turns the check off.
  HttpFilePolicy q = Make({.idle_ms = 10'000, .min_rate = 0, .rate_window_ms = 1000});
  q.BeginRead(0, 100, 0);
  Send(q, 0);
  q.OnHead(0, Partial(0, 99, 100));
  EXPECT_EQ(q.deadline_ms(), 10'000);
}

TEST(HttpPolicy, SetEndMovesTheReadsEnd) {
  HttpFilePolicy p = Make();
  p.BeginRead(0, 65536, 0);
  Send(p, 0);
  p.OnHead(0, Partial(0, 65535, 1'000'000));
  p.OnBody(0, 8);
  p.SetEnd(300);
  EXPECT_EQ(p.OnBody(0, 1000).take, 292u);
  EXPECT_FALSE(p.InFlight());
  EXPECT_EQ(p.Next(0).action, HttpAction::kDone);
}

TEST(HttpLimitsTest, SetFromTextWithPreciseErrors) {
  HttpLimits l;
  ASSERT_TRUE(SetHttpLimit(l, "PB_HTTP_IDLE_MS", "250").ok());
  EXPECT_EQ(l.idle_ms, 250u);
  ASSERT_TRUE(SetHttpLimit(l, "PB_HTTP_MAX_JSON_BYTES", "1048576").ok());
  EXPECT_EQ(l.max_json_bytes, 1048576u);
  pb::Status bad = SetHttpLimit(l, "PB_HTTP_IDLE_MS", "fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(bad.error().message, "PB_HTTP_IDLE_MS must be a whole number from 1 below 2^32, got `fast`");
  EXPECT_FALSE(SetHttpLimit(l, "PB_HTTP_TOTAL_MS", "0").ok());
  EXPECT_TRUE(SetHttpLimit(l, "PB_HTTP_RETRIES", "0").ok());
  EXPECT_FALSE(SetHttpLimit(l, "PB_HTTP_NOPE", "1").ok());
  EXPECT_EQ(HttpLimitNames().size(), 9u);
  for (std::string_view name : HttpLimitNames()) EXPECT_TRUE(SetHttpLimit(l, name, "7").ok()) << name;
}

}  // namespace
}  // namespace pb::net

namespace pb::net {
namespace {

TEST(HttpCallClock, AnUnansweredCallFailsAfterIdleMsAndTheCallEndsByTotalMs) {
  HttpLimits limits;
  limits.idle_ms = 300;
  limits.total_ms = 2000;
  HttpCallClock c(limits, "POST https://hub.test/api/models/o/r/commit/main", 0);
  EXPECT_EQ(c.deadline_ms(), 300);
  EXPECT_FALSE(c.Expired(299).has_value());
  bool total = true;
  auto e = c.Expired(300, &total);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(total);
  EXPECT_EQ(e->code, ErrorCode::IoError);
  EXPECT_EQ(e->message, "POST https://hub.test/api/models/o/r/commit/main: no answer for 300 ms (PB_HTTP_IDLE_MS)");
  // A body sent keeps the attempt alive; an answer that stops sending fails as `no data`.
  c.BeginAttempt(400);
  c.OnProgress(600, 10);
  EXPECT_EQ(c.deadline_ms(), 900);
  c.OnHead(800);
  EXPECT_FALSE(c.Expired(1099).has_value());
  auto d = c.Expired(1100, &total);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->message, "POST https://hub.test/api/models/o/r/commit/main: no data for 300 ms (PB_HTTP_IDLE_MS)");
  // The call's deadline caps every attempt and wait: the retry decision, asked through the clock, knows it.
  const AttemptFailure busy{.status = 503, .retry_after = "1"};
  EXPECT_EQ(c.DecideRetry(1000, busy, 0).give_up, GiveUp::kDeadline);
  EXPECT_TRUE(c.DecideRetry(900, {.status = 503, .retry_after = "0"}, 0).retry());
  EXPECT_EQ(c.DecideRetry(1900, {.status = 503, .retry_after = "0"}, 0).wait_ms, 0u);
  EXPECT_EQ(c.DecideRetry(1800, {.status = 503}, 0).give_up, GiveUp::kDeadline);  // the 250 ms backoff
  EXPECT_EQ(c.DecideRetry(1700, {.status = 503}, 0).wait_ms, 250u);
  c.BeginAttempt(1950);
  EXPECT_EQ(c.deadline_ms(), 2000);
  auto t = c.Expired(2000, &total);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(total);
  EXPECT_EQ(t->message,
            "POST https://hub.test/api/models/o/r/commit/main: did not finish within 2000 ms (PB_HTTP_TOTAL_MS)");
}

TEST(HttpCallClock, AFlowingBodyMustKeepTheMinimumRate) {
  HttpLimits limits;  // 1024 B/s over 30 s windows, idle 10 s
  HttpCallClock c(limits, "PUT https://hub.test/lfs/upload/x", 0);
  for (int64_t t = 1000; t <= 30000; t += 1000) c.OnProgress(t, 100);  // 100 B/s
  EXPECT_EQ(c.deadline_ms(), 31000);
  auto e = c.Expired(31000);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "PUT https://hub.test/lfs/upload/x: slower than 1024 B/s for 30000 ms (PB_HTTP_MIN_RATE)");
  HttpCallClock fast(limits, "PUT x", 0);
  for (int64_t t = 1000; t <= 31000; t += 1000) fast.OnProgress(t, 4096);
  EXPECT_FALSE(fast.Expired(31000).has_value());
}

}  // namespace
}  // namespace pb::net
