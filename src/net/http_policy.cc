#include "net/http_policy.h"

#include <algorithm>
#include <utility>

#include "core/utf8.h"
#include "net/http_url.h"

namespace pb::net {
namespace {

Error Io(std::string message) { return MakeError(ErrorCode::IoError, std::move(message)); }

bool IsRedirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

bool IsHttp(std::string_view url) {
  std::string scheme = UrlScheme(url);
  return (scheme == "http" || scheme == "https") && !UrlOrigin(url).empty();
}

}  // namespace

Result<HttpFilePolicy> HttpFilePolicy::Open(HttpTarget target, HttpLimits limits) {
  target.label = ClipForMessage(target.label, 1000);  // every message names it: a pasted megabyte stays out
  if (!IsHttp(target.url)) return MakeError(ErrorCode::InvalidArgument, "`" + target.label + "` is not an http(s) URL");
  if (UrlHasUserInfo(target.url))
    return MakeError(ErrorCode::InvalidArgument,
                     "`" + target.label + "`: URLs with user info (user:password@) are refused; use a token instead");
  return HttpFilePolicy(std::move(target), limits, std::make_shared<HttpFileState>());
}

void HttpFilePolicy::BeginRead(uint64_t start, uint64_t end, int64_t now_ms) {
  pos_ = start;
  end_ = end;
  cap_.reset();
  adapter_cap_ = false;
  failures_ = 0;
  attempt_progress_ = false;
  read_deadline_ = now_ms + limits_.total_ms;
  wait_until_ = 0;
  error_.reset();
  failed_status_ = 0;
  redirect_url_.clear();
  redirects_ = 0;
  if (phase_ == Phase::kHead) phase_ = Phase::kNone;  // an unanswered request of an earlier read is not this one's
}

void HttpFilePolicy::BeginReadWhole(int64_t now_ms, std::optional<uint64_t> cap) {
  uint64_t c = cap.value_or(limits_.max_json_bytes);
  BeginRead(0, c == kUnbounded ? kUnbounded : c + 1, now_ms);  // one byte past the cap tells that it is exceeded
  cap_ = c;
}

void HttpFilePolicy::BeginReadWholeAdapter(int64_t now_ms) {
  BeginReadWhole(now_ms, limits_.max_adapter_bytes);
  adapter_cap_ = true;
}

std::string HttpFilePolicy::CapText() const {
  return adapter_cap_ ? "for adapter weights read whole (PB_HTTP_MAX_ADAPTER_BYTES)"
                      : "for a JSON file read whole (PB_HTTP_MAX_JSON_BYTES)";
}

void HttpFilePolicy::SetEnd(uint64_t end) { end_ = end; }

uint64_t HttpFilePolicy::Stop() const { return file_->size ? std::min(end_, *file_->size) : end_; }

int64_t HttpFilePolicy::Deadline() const {
  int64_t d = std::min<int64_t>(read_deadline_, last_progress_ + limits_.idle_ms);
  if (phase_ == Phase::kBody && limits_.min_rate > 0) d = std::min<int64_t>(d, window_start_ + limits_.rate_window_ms);
  return d;
}

void HttpFilePolicy::Fail(Error error, int status) {
  phase_ = Phase::kNone;
  error_ = std::move(error);
  failed_status_ = status;
}

HttpStep HttpFilePolicy::Next(int64_t now_ms) {
  if (error_) return {.action = HttpAction::kFail, .error = error_};
  if (phase_ == Phase::kHead) return {.action = HttpAction::kRead, .deadline_ms = Deadline()};
  if (pos_ >= Stop()) {
    if (cap_ && pos_ > *cap_) {
      Fail(Io("`" + t_.label + "` is larger than " + std::to_string(*cap_) + " bytes, the cap " + CapText()));
      return {.action = HttpAction::kFail, .error = error_};
    }
    return {.action = HttpAction::kDone};
  }
  if (phase_ == Phase::kBody) {
    if (body_pos_ <= pos_ && pos_ < body_end_) return {.action = HttpAction::kRead, .deadline_ms = Deadline()};
    phase_ = Phase::kNone;  // this body cannot serve the read: a new request
  }
  if (now_ms < wait_until_) return {.action = HttpAction::kWait, .deadline_ms = wait_until_};
  if (now_ms >= read_deadline_) {
    Fail(Io("cannot " + Verb() + " `" + t_.label + "`: the read did not finish within " +
            std::to_string(limits_.total_ms) + " ms (PB_HTTP_TOTAL_MS)"));
    return {.action = HttpAction::kFail, .error = error_};
  }
  uint64_t stop = Stop();
  HttpRequest request;
  from_landed_ = redirect_url_.empty() && !file_->landed_url.empty();
  request_url_ = !redirect_url_.empty() ? redirect_url_ : from_landed_ ? file_->landed_url : t_.url;
  request.url = request_url_;
  request.range = "bytes=" + std::to_string(pos_) + "-" + (stop == kUnbounded ? "" : std::to_string(stop - 1));
  if (!t_.token.empty() && !t_.token_origin.empty() && UrlOrigin(request_url_) == t_.token_origin)
    request.authorization = "Bearer " + t_.token;
  sent_token_ = !request.authorization.empty();
  phase_ = Phase::kHead;
  last_progress_ = now_ms;
  attempt_progress_ = false;
  ++file_->requests;
  return {.action = HttpAction::kSend, .request = std::move(request), .deadline_ms = Deadline()};
}

void HttpFilePolicy::Failure(int64_t now_ms, Error error, const AttemptFailure& what, bool progress_resets) {
  const int status = what.status;
  // An attempt that brought bytes starts the count afresh, unless it failed for being too slow: a server
  // trickling bytes would otherwise be retried until the read's deadline.
  if (attempt_progress_ && progress_resets) failures_ = 0;
  attempt_progress_ = false;
  phase_ = Phase::kNone;
  redirect_url_.clear();
  redirects_ = 0;
  if (from_landed_ && status != 0) {
    // The CDN URL reused from an earlier answer answered an HTTP error (expired, moved, or the file changed):
    // forget it and go back through the start URL at once, without counting an attempt; that answer decides. A
    // body cut short or a broken connection there is retried there, counted as anywhere. (Another reader may have
    // landed somewhere newer meanwhile: that URL is kept.)
    if (file_->landed_url == request_url_) file_->landed_url.clear();
    from_landed_ = false;
    return;
  }
  // A wait that would end past the read's deadline is not started: the read fails now, with this error.
  RetryDecision decision = DecideRetry(limits_, what, failures_, read_deadline_ - now_ms);
  if (!decision.retry()) {
    if (!decision.reason.empty()) error.message += " (" + decision.reason + ")";
    return Fail(std::move(error), status);
  }
  ++failures_;
  wait_until_ = now_ms + static_cast<int64_t>(decision.wait_ms);
}

bool HttpFilePolicy::CheckRedirectTarget(const std::string& url, std::string_view how) {
  if (!IsHttp(url)) {
    std::string scheme = UrlScheme(url);
    Fail(Io("cannot open `" + t_.label + "`: " + std::string(how) + " `" +
            ClipForMessage(scheme.empty() ? url : scheme + ":") + "`, which is not an http(s) URL"));
    return false;
  }
  if (UrlHasUserInfo(url)) {
    Fail(Io("cannot open `" + t_.label + "`: " + std::string(how) + " a URL with user info, which is refused"));
    return false;
  }
  return true;
}

void HttpFilePolicy::HttpError(int64_t now_ms, const HttpHead& head) {
  int status = head.status;
  std::string message = "cannot " + Verb() + " `" + t_.label + "`: HTTP " + std::to_string(status);
  if (head.error_message && !head.error_message->empty())
    message += ": " + ClipForMessage(*head.error_message);  // server text, clipped
  if ((status == 401 || status == 403) && !sent_token_) message += " (no token was sent)";
  Failure(now_ms, Io(std::move(message)), {.status = status, .retry_after = head.retry_after, .date = head.date});
}

// Pins the first answer's ETag and size; a later answer with others means the file changed.
bool HttpFilePolicy::Pin(const HttpHead& head, std::optional<uint64_t> size) {
  std::optional<std::string> etag = head.etag;
  if (etag && etag->starts_with("W/")) etag->erase(0, 2);
  HttpFileState& f = *file_;
  if (!f.answered) {
    f.answered = true;
    f.etag = etag;
  } else if (etag && f.etag && *etag != *f.etag) {
    Fail(Io("`" + t_.label + "` changed while being read (ETag " + ClipForMessage(*f.etag) + " became " +
            ClipForMessage(*etag) + ")"));
    return false;
  }
  if (!size) return true;
  if (f.size && *size != *f.size) {
    Fail(Io("`" + t_.label + "` changed while being read (size " + std::to_string(*f.size) + " became " +
            std::to_string(*size) + ")"));
    return false;
  }
  f.size = size;
  if (cap_ && *size > *cap_) {
    Fail(Io("`" + t_.label + "` is " + std::to_string(*size) + " bytes, more than the cap of " + std::to_string(*cap_) +
            " " + CapText()));
    return false;
  }
  return true;
}

void HttpFilePolicy::OnHead(int64_t now_ms, const HttpHead& head) {
  if (phase_ != Phase::kHead) return;
  last_progress_ = now_ms;
  if (head.repo_commit && !file_->commit) file_->commit = head.repo_commit;  // the Hub names it on the resolve hop
  if (!head.final_url.empty() && head.final_url != request_url_ &&
      !CheckRedirectTarget(head.final_url, "redirected to"))
    return;
  int status = head.status;
  if (IsRedirect(status)) {
    if (!head.location)
      return Fail(Io("cannot open `" + t_.label + "`: HTTP " + std::to_string(status) + " without a Location"));
    std::optional<std::string> next = ResolveUrl(request_url_, TrimHeaderValue(*head.location));
    if (!next || !CheckRedirectTarget(*next, "redirected to")) {
      if (!error_)
        Fail(Io("cannot open `" + t_.label + "`: unusable redirect Location `" + ClipForMessage(*head.location) + "`"));
      return;
    }
    if (++redirects_ > limits_.max_redirects)
      return Fail(Io("cannot open `" + t_.label + "`: more than " + std::to_string(limits_.max_redirects) +
                     " redirects (PB_HTTP_MAX_REDIRECTS)"));
    redirect_url_ = std::move(*next);
    phase_ = Phase::kNone;
    return;
  }
  // Answered at the end of a chain this policy followed (or, for a browser, that its fetch followed): remember
  // where, for the next requests of this file. Kept only once the answer passes Pin below (an error drops it).
  std::string landed = !head.final_url.empty() && head.final_url != request_url_ ? head.final_url
                       : redirects_ > 0                                          ? request_url_
                                                                                 : std::string();
  redirect_url_.clear();
  redirects_ = 0;
  uint64_t stop = Stop();
  if (status == 416) {
    std::string range = head.content_range.value_or("");
    auto total = range.starts_with("bytes */") ? ParseDecimal(std::string_view(range).substr(8)) : std::nullopt;
    if (!total) return HttpError(now_ms, head);
    phase_ = Phase::kNone;
    Pin(head, total);  // the size is known now: Next() sees the read ends there
    return;
  }
  if (status == 206) {
    std::string range = head.content_range.value_or("");
    std::optional<uint64_t> a, b, total;
    bool ok = false;
    if (range.starts_with("bytes ")) {
      std::string_view v = std::string_view(range).substr(6);
      size_t dash = v.find('-'), slash = v.find('/');
      if (dash != std::string_view::npos && slash != std::string_view::npos && dash < slash) {
        a = ParseDecimal(v.substr(0, dash));
        b = ParseDecimal(v.substr(dash + 1, slash - dash - 1));
        std::string_view tail = v.substr(slash + 1);
        total = tail == "*" ? std::optional<uint64_t>() : ParseDecimal(tail);
        ok = a && b && (tail == "*" || total);
      }
    }
    std::optional<uint64_t> length = head.content_length ? ParseHttpDecimal(*head.content_length) : std::nullopt;
    if (!ok || *a != pos_ || *b >= stop || *b < pos_ || (head.content_length && (!length || *length != *b - pos_ + 1)))
      return Fail(Io("cannot read `" + t_.label + "`: wrong Content-Range `" + range + "` in answer to bytes=" +
                     std::to_string(pos_) + "-" + (stop == kUnbounded ? "" : std::to_string(stop - 1))));
    if (!Pin(head, total)) return;
    if (!landed.empty()) file_->landed_url = landed;
    file_->ranged = true;
    phase_ = Phase::kBody;
    body_pos_ = *a;
    body_end_ = *b + 1;
  } else if (status == 200) {
    // The whole file from byte 0 (the server ignored Range). Its length is the file's unless it is compressed.
    std::optional<uint64_t> size;
    if (head.content_length && (!head.content_encoding || *head.content_encoding == "identity"))
      size = ParseHttpDecimal(*head.content_length);
    if (!Pin(head, size)) return;
    if (!landed.empty()) file_->landed_url = landed;
    phase_ = Phase::kBody;
    body_pos_ = 0;
    body_end_ = size.value_or(kUnbounded);
  } else {
    return HttpError(now_ms, head);
  }
  window_start_ = now_ms;
  window_bytes_ = 0;
}

BodySlice HttpFilePolicy::OnBody(int64_t now_ms, uint64_t length) {
  BodySlice slice;
  if (phase_ != Phase::kBody || length == 0) return slice;
  last_progress_ = now_ms;
  window_bytes_ += length;
  if (body_pos_ < pos_) {  // a 200 to a ranged request starts at byte 0: skip to pos
    slice.skip = std::min(length, pos_ - body_pos_);
    body_pos_ += slice.skip;
  }
  if (body_end_ != kUnbounded && body_pos_ + (length - slice.skip) > body_end_) {
    Fail(Io("cannot read `" + t_.label + "`: the server sent more bytes than its Content-Range"));
    return {};
  }
  if (body_pos_ == pos_) {
    uint64_t stop = Stop();
    slice.take = stop > pos_ ? std::min(length - slice.skip, stop - pos_) : 0;
    body_pos_ += slice.take;
    pos_ += slice.take;
    if (slice.take > 0) attempt_progress_ = true;
  }
  return slice;
}

void HttpFilePolicy::OnBodyEnd(int64_t now_ms) {
  if (phase_ != Phase::kBody) return;
  if (body_end_ == kUnbounded) {
    phase_ = Phase::kNone;
    file_->size = body_pos_;  // a body of unknown length ended: so does the file
    return;
  }
  if (body_pos_ < body_end_)
    return Failure(now_ms,
                   Io("cannot read `" + t_.label + "`: the connection closed at byte " + std::to_string(body_pos_) +
                      " of " + std::to_string(body_end_)),
                   {});
  phase_ = Phase::kNone;  // that answer is used up: Next() asks for the rest
}

void HttpFilePolicy::OnTransportError(int64_t now_ms, TransportError kind) {
  if (phase_ == Phase::kNone) return;
  if (phase_ == Phase::kBody && body_end_ != kUnbounded && kind == TransportError::kBroken)
    return OnBodyEnd(now_ms);  // the same failure as a body cut short, with the same message
  std::string what;
  switch (kind) {
    // The host named: an address's own is not in its label (hf://… resolves at HF_ENDPOINT, a redirect leaves it).
    case TransportError::kResolve:
      what = "the host name `" + ClipForMessage(UrlHost(request_url_)) + "` did not resolve";
      break;
    case TransportError::kConnect: what = "could not connect to `" + ClipForMessage(UrlHost(request_url_)) + "`"; break;
    case TransportError::kBroken: what = "the connection broke"; break;
    case TransportError::kTls: what = "the TLS handshake or certificate check failed"; break;
    case TransportError::kBadScheme: what = "the URL's scheme is not supported"; break;
  }
  if (phase_ == Phase::kBody) what += " at byte " + std::to_string(body_pos_);
  Failure(now_ms, Io("cannot " + Verb() + " `" + t_.label + "`: " + what), {.transport = kind});
}

void HttpFilePolicy::OnTimer(int64_t now_ms) {
  if (phase_ == Phase::kNone) return;
  if (now_ms >= read_deadline_)
    return Fail(Io("cannot " + Verb() + " `" + t_.label + "`: the read did not finish within " +
                   std::to_string(limits_.total_ms) + " ms (PB_HTTP_TOTAL_MS)"));
  if (now_ms >= last_progress_ + static_cast<int64_t>(limits_.idle_ms)) {
    std::string what = phase_ == Phase::kHead ? "no answer" : "no data at byte " + std::to_string(body_pos_);
    return Failure(now_ms,
                   Io("cannot " + Verb() + " `" + t_.label + "`: " + what + " for " + std::to_string(limits_.idle_ms) +
                      " ms (PB_HTTP_IDLE_MS)"),
                   {});
  }
  if (phase_ == Phase::kBody && limits_.min_rate > 0 && now_ms >= window_start_ + limits_.rate_window_ms) {
    uint64_t elapsed = static_cast<uint64_t>(now_ms - window_start_);
    if (window_bytes_ * 1000 < static_cast<uint64_t>(limits_.min_rate) * elapsed)
      return Failure(now_ms,
                     Io("cannot read `" + t_.label + "`: slower than " + std::to_string(limits_.min_rate) +
                        " B/s for " + std::to_string(limits_.rate_window_ms) + " ms at byte " +
                        std::to_string(body_pos_) + " (PB_HTTP_MIN_RATE)"),
                     {}, /*progress_resets=*/false);
    window_start_ = now_ms;
    window_bytes_ = 0;
  }
}

bool HttpFilePolicy::InFlight() const {
  if (error_) return false;
  if (phase_ == Phase::kHead) return true;
  return phase_ == Phase::kBody && pos_ < Stop() && body_pos_ <= pos_ && pos_ < body_end_;
}

void HttpFilePolicy::OnClosed() {
  if (phase_ != Phase::kNone) phase_ = Phase::kNone;
}

HttpCallClock::HttpCallClock(HttpLimits limits, std::string what, int64_t now_ms)
    : limits_(limits), what_(ClipForMessage(what, 1000)), call_deadline_(now_ms + limits.total_ms) {
  BeginAttempt(now_ms);
}

void HttpCallClock::BeginAttempt(int64_t now_ms) {
  last_progress_ = window_start_ = now_ms;
  window_bytes_ = 0;
  flowing_ = answered_ = false;
}

void HttpCallClock::OnProgress(int64_t now_ms, uint64_t bytes) {
  if (bytes == 0) return;
  if (!flowing_) {
    flowing_ = true;
    window_start_ = now_ms;
    window_bytes_ = 0;
  }
  last_progress_ = now_ms;
  window_bytes_ += bytes;
}

void HttpCallClock::OnHead(int64_t now_ms) {
  answered_ = true;
  last_progress_ = now_ms;
}

int64_t HttpCallClock::deadline_ms() const {
  int64_t d = std::min<int64_t>(call_deadline_, last_progress_ + limits_.idle_ms);
  if (flowing_ && limits_.min_rate > 0) d = std::min<int64_t>(d, window_start_ + limits_.rate_window_ms);
  return d;
}

std::optional<Error> HttpCallClock::Expired(int64_t now_ms, bool* total) {
  if (total) *total = false;
  if (now_ms >= call_deadline_) {
    if (total) *total = true;
    return Io(what_ + ": did not finish within " + std::to_string(limits_.total_ms) + " ms (PB_HTTP_TOTAL_MS)");
  }
  if (now_ms >= last_progress_ + static_cast<int64_t>(limits_.idle_ms))
    return Io(what_ + ": " + (answered_ ? "no data" : "no answer") + " for " + std::to_string(limits_.idle_ms) +
              " ms (PB_HTTP_IDLE_MS)");
  if (flowing_ && limits_.min_rate > 0 && now_ms >= window_start_ + limits_.rate_window_ms) {
    const uint64_t elapsed = static_cast<uint64_t>(now_ms - window_start_);
    if (window_bytes_ * 1000 < static_cast<uint64_t>(limits_.min_rate) * elapsed)
      return Io(what_ + ": slower than " + std::to_string(limits_.min_rate) + " B/s for " +
                std::to_string(limits_.rate_window_ms) + " ms (PB_HTTP_MIN_RATE)");
    window_start_ = now_ms;
    window_bytes_ = 0;
  }
  return std::nullopt;
}

}  // namespace pb::net
