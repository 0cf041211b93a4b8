// The one HTTP policy of peft-bridge, as a sans-I/O state machine: what to request next, whether an answer is
// usable, which failures are worth retrying and when, and when to give up. It reads no clock and opens no socket:
// the transport (libcurl in src/cli/http_source.cc, `fetch` in web/src/remote/range-client.js) passes the time in
// ms and reports what happened, so the native CLI, the npm CLI and the JS API make the same requests, wait the
// same times and fail with the same messages.
//
// One HttpFilePolicy per remote file (and one Reader() more per range read at the same time, sharing what the
// file's answers told: ETag, size, where its redirects landed). A read asks for bytes [start, end) (or the whole file
// under a size cap); the transport then loops:
//   step = Next(now)
//     kSend: drop any open body; send step.request; report OnHead / OnTransportError (or OnTimer at step.deadline)
//     kRead: keep reading the request in flight: OnHead, then OnBody per chunk, OnBodyEnd at its end, OnTimer
//            when step.deadline passes first, OnTransportError when the connection fails
//     kWait: drop any open body; wait until step.deadline, then call Next again
//     kDone: the read has every byte it asked for (or reached the end of the file); a body may stay open for a
//            read that continues it
//     kFail: drop any open body; step.error is the read's error
//
// Policy (defaults in HttpLimits, each configurable; docs/remote.md lists them):
//  - retried as the one retry decision says (net/http_retry.h: which statuses and failures, the backoff, the
//    server's Retry-After), resuming at the byte reached: connection failures, 408, 429, 500, 502, 503, 504,
//    truncated bodies, an idle connection, a rate below the minimum;
//  - never retried: other statuses, a Content-Range that does not answer the Range sent, an ETag or size that changes,
//    more redirects than the cap, a redirect to a non-HTTP(S) URL or to one with user info, a body over the cap;
//  - URLs with user info, and non-HTTP(S) URLs, are refused before any request;
//  - the token goes to the token origin only (the Hub endpoint's), on every hop: never after a redirect elsewhere;
//  - deadlines: per request, no byte for idle_ms fails the attempt; each read (every attempt and wait of it)
//    ends by total_ms; once a body flows, each rate window must bring min_rate bytes/s.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/result.h"
#include "net/http_limits.h"
#include "net/http_retry.h"

namespace pb::net {

enum class HttpAction : uint8_t { kSend, kRead, kWait, kDone, kFail };

struct HttpRequest {
  std::string url;
  std::string range;          // the Range header's value: "bytes=a-b" or "bytes=a-"
  std::string authorization;  // the Authorization header's value, "" for none
};

struct HttpStep {
  HttpAction action = HttpAction::kDone;
  HttpRequest request{};         // kSend
  int64_t deadline_ms = 0;       // kSend / kRead: call OnTimer then if nothing happened; kWait: wait until then
  std::optional<Error> error{};  // kFail
};

// The headers of one answer the policy looks at (absent ones as std::nullopt).
struct HttpHead {
  int status = 0;
  std::optional<std::string> content_range, content_length, content_encoding, etag, retry_after, date, error_message,
      location, repo_commit;
  // The URL that answered when the transport followed redirects itself (a browser's fetch); "" otherwise.
  std::string final_url;
};

// What OnBody makes of a chunk: drop its first `skip` bytes, deliver the next `take` to the reader. Bytes past
// skip + take stay unread: a transport that keeps them offers them first to the next OnBody.
struct BodySlice {
  uint64_t skip = 0;
  uint64_t take = 0;
};

struct HttpTarget {
  std::string url;
  std::string label;         // how errors name the file (the address the user gave)
  std::string token;         // sent as a Bearer token to token_origin only ("" for none)
  std::string token_origin;  // UrlOrigin of the endpoint the token belongs to
};

// What a file's answers told, shared by every reader of the file (HttpFilePolicy::Reader): its size and ETag as
// the first answer pinned them, the commit the Hub named, where its redirect chain landed, the requests made.
struct HttpFileState {
  std::optional<uint64_t> size;
  std::optional<std::string> etag, commit;
  bool answered = false;  // an answer was pinned (size and ETag are the file's from then on)
  bool ranged = false;    // an answer was a 206: the server honours Range
  // Where the last redirect chain landed and was answered (the CDN URL a Hub resolve redirects to): later requests
  // for this file, by any of its readers, start there, held to the pinned ETag like every answer, which saves a
  // round trip per range. An HTTP error there drops it and the read goes back through the start URL at once (a
  // signed URL may have expired).
  std::string landed_url;
  uint32_t requests = 0;
};

class HttpFilePolicy {
 public:
  // InvalidArgument for a URL that is not http(s) or that carries user info: refused before any request.
  static Result<HttpFilePolicy> Open(HttpTarget target, HttpLimits limits);

  // Another reader of the same file, for reading other ranges at the same time: the same target and limits, and
  // the same HttpFileState (an ETag pinned by either holds both to it; the landed URL either learns or drops is
  // both's; requests() counts both), with a read and a request of its own. Readers of one file are driven from one
  // thread. Open one only once ParallelReads() says so.
  HttpFilePolicy Reader() const { return HttpFilePolicy(t_, limits_, file_); }
  // True once reads of other ranges may run on Readers: an answer pinned the ETag and the size and was a 206 (a
  // server that ignores Range would send each reader the whole file from its first byte).
  bool ParallelReads() const { return file_->answered && file_->ranged && file_->size.has_value(); }

  // Starts a read of bytes [start, end) (end clamped to the file's size once known; kUnbounded for "to the end").
  void BeginRead(uint64_t start, uint64_t end, int64_t now_ms);
  // Starts a read of the whole file, which may hold at most `cap` bytes (the JSON cap unless given).
  void BeginReadWhole(int64_t now_ms, std::optional<uint64_t> cap = std::nullopt);
  // Starts a read of an adapter's whole weights file, held to max_adapter_bytes.
  void BeginReadWholeAdapter(int64_t now_ms);
  // Moves the current read's end (the header's end is known only from its first 8 bytes).
  void SetEnd(uint64_t end);

  HttpStep Next(int64_t now_ms);

  void OnHead(int64_t now_ms, const HttpHead& head);
  BodySlice OnBody(int64_t now_ms, uint64_t length);
  void OnBodyEnd(int64_t now_ms);
  void OnTransportError(int64_t now_ms, TransportError kind);
  void OnTimer(int64_t now_ms);
  // The transport dropped the open body (closing the file, or a read that did not continue it).
  void OnClosed();

  // True while the request in flight is still wanted (its head awaited, or its body serving the read): a transport
  // whose callbacks cannot call Next() (it sends) asks this instead, and stops the transfer when it turns false.
  bool InFlight() const;
  // When OnTimer is due for the request in flight.
  int64_t deadline_ms() const { return Deadline(); }

  uint64_t position() const { return pos_; }  // the next byte the read wants
  std::optional<uint64_t> size() const { return file_->size; }
  const std::optional<std::string>& etag() const { return file_->etag; }
  const std::optional<std::string>& commit() const { return file_->commit; }
  uint32_t requests() const { return file_->requests; }  // by every reader of the file
  const HttpLimits& limits() const { return limits_; }
  // The HTTP status of the error the read failed with (0 if none, or not an HTTP status).
  int failed_status() const { return failed_status_; }

 private:
  enum class Phase : uint8_t { kNone, kHead, kBody };

  HttpFilePolicy(HttpTarget target, HttpLimits limits, std::shared_ptr<HttpFileState> file)
      : t_(std::move(target)), limits_(limits), file_(std::move(file)) {}

  uint64_t Stop() const;
  int64_t Deadline() const;
  std::string Verb() const { return file_->answered ? "read" : "open"; }
  void Fail(Error error, int status = 0);
  // A failure of the attempt in flight: retried after a backoff if the policy allows, else the read's error.
  void Failure(int64_t now_ms, Error error, const AttemptFailure& what, bool progress_resets = true);
  void HttpError(int64_t now_ms, const HttpHead& head);
  bool Pin(const HttpHead& head, std::optional<uint64_t> size);
  std::string CapText() const;  // which cap a whole read is held to, for its message
  bool CheckRedirectTarget(const std::string& url, std::string_view how);

  HttpTarget t_;
  HttpLimits limits_;
  std::shared_ptr<HttpFileState> file_;  // the file, as its answers told it (shared with its other readers)
  // The read.
  uint64_t pos_ = 0, end_ = 0;
  std::optional<uint64_t> cap_;  // a whole-file read's size cap
  bool adapter_cap_ = false;     // ...which is max_adapter_bytes (else a JSON file's)
  uint32_t failures_ = 0;
  bool attempt_progress_ = false;  // the attempt in flight delivered bytes
  int64_t read_deadline_ = 0;
  int64_t wait_until_ = 0;
  std::optional<Error> error_;
  int failed_status_ = 0;
  // The request in flight and its body.
  Phase phase_ = Phase::kNone;
  std::string request_url_;
  std::string redirect_url_;  // the next hop of a redirect chain ("" to start at the start URL)
  bool from_landed_ = false;  // the request in flight started at file_->landed_url (not reached through a redirect)
  uint32_t redirects_ = 0;
  bool sent_token_ = false;                        // the request in flight carries the token
  uint64_t body_pos_ = 0, body_end_ = kUnbounded;  // file offsets of the body's next byte and of its end
  int64_t last_progress_ = 0;
  int64_t window_start_ = 0;
  uint64_t window_bytes_ = 0;
};

// The deadlines of one call that is not a file read (a push's repo and branch creation, preupload, LFS batch,
// uploads, multipart completion, commit), from the same HttpLimits as a read's, so that no request of either CLI
// or of the JS API waits forever: per attempt, nothing sent or received for idle_ms fails it (`no answer` once the
// request is sent and its answer has not begun); once bytes flow either way, each rate window must bring min_rate
// bytes/s; the call, every attempt and backoff wait included, ends by total_ms. Whether a failed attempt is retried
// is DecideRetry's answer, which every call but a push's commit asks (the commit is never retried). Sans I/O, as
// HttpFilePolicy: the transport passes the time, reports progress, and asks Expired() when deadline_ms() passes.
class HttpCallClock {
 public:
  // Starts the call: `what` names it in errors (`POST https://…/preupload/main`).
  HttpCallClock(HttpLimits limits, std::string what, int64_t now_ms);

  void BeginAttempt(int64_t now_ms);
  // `bytes` more of the request's body were sent, or of the answer's body received.
  void OnProgress(int64_t now_ms, uint64_t bytes);
  // The answer's head arrived.
  void OnHead(int64_t now_ms);
  // When Expired() may next report the attempt failed.
  int64_t deadline_ms() const;
  // The attempt's error once one of its deadlines passed (IoError naming the limit), else nullopt; `total` tells
  // whether it was the call's own deadline (no attempt may follow).
  std::optional<Error> Expired(int64_t now_ms, bool* total = nullptr);
  // Whether and when to try again after a failed attempt, `failures` attempts having failed before it: the one
  // retry decision (net/http_retry.h), against this call's limits and deadline.
  RetryDecision DecideRetry(int64_t now_ms, const AttemptFailure& what, uint32_t failures) const {
    return net::DecideRetry(limits_, what, failures, call_deadline_ - now_ms);
  }
  const HttpLimits& limits() const { return limits_; }

 private:
  HttpLimits limits_;
  std::string what_;
  int64_t call_deadline_ = 0;
  int64_t last_progress_ = 0;
  int64_t window_start_ = 0;
  uint64_t window_bytes_ = 0;
  bool flowing_ = false;   // bytes moved in this attempt: the minimum rate applies
  bool answered_ = false;  // the answer's head arrived
};

}  // namespace pb::net
