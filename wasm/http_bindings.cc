// Embind layer over the HTTP policy (net/http_policy.h) for web/src/remote/range-client.js, which is only its `fetch`
// transport, and over a push call's deadlines and retry decision (net/http_retry.h) for web/src/remote/push.js. Thin:
// values cross as numbers and strings; a step comes back as a small JS object.
//  - Times are the transport's clock in ms (performance.now() or Date.now()), sizes and offsets doubles (exact
//    below 2^53); an end or cap of -1 means "unbounded" / "the default cap", a size of -1 "unknown".
//  - Headers cross as one string of "name\nvalue\n" pairs (lower-case names), limits as "NAME=value\n" lines.
#include <emscripten/bind.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "app/report.h"
#include "net/http_policy.h"
#include "failure_value.h"
#include "net/http_url.h"
#include "net/worker_endpoint.h"

namespace pb::wasm {
namespace {

using emscripten::val;

uint64_t Offset(double v) { return v < 0 ? net::kUnbounded : static_cast<uint64_t>(v); }

// HttpLimits from "NAME=value" lines (the PB_HTTP_* names).
Result<net::HttpLimits> LimitsFromText(std::string_view rest) {
  net::HttpLimits limits;
  while (!rest.empty()) {
    std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    PB_RETURN_IF_ERROR(net::SetHttpLimit(limits, line.substr(0, eq), line.substr(eq + 1)));
  }
  return limits;
}

class HttpFile {
 public:
  HttpFile(std::string url, std::string label, std::string token, std::string token_origin, std::string limits_text) {
    auto parsed = LimitsFromText(limits_text);
    if (!parsed.ok()) {
      error_ = parsed.error();
      return;
    }
    const net::HttpLimits limits = parsed.value();
    auto opened = net::HttpFilePolicy::Open({.url = std::move(url),
                                             .label = std::move(label),
                                             .token = std::move(token),
                                             .token_origin = std::move(token_origin)},
                                            limits);
    if (!opened.ok()) error_ = opened.error();
    else policy_.emplace(std::move(opened.value()));
  }

  // Another reader of the same file (HttpFilePolicy::Reader): its own read and request, the file's ETag, size and
  // landed URL shared with this one. Only once parallelReads().
  HttpFile reader() const { return HttpFile(policy_->Reader()); }
  bool parallel_reads() const { return policy_ && policy_->ParallelReads(); }

  bool ok() const { return policy_.has_value(); }
  std::string error_json() const { return error_ ? RenderErrorJson(*error_) : std::string(); }
  std::string error_text() const { return error_ ? RenderErrorText(*error_) : std::string(); }

  void begin_read(double start, double end, double now) { policy_->BeginRead(Offset(start), Offset(end), Now(now)); }
  void begin_read_whole(double now, double cap) {
    policy_->BeginReadWhole(Now(now), cap < 0 ? std::nullopt : std::optional<uint64_t>(Offset(cap)));
  }
  void begin_read_whole_adapter(double now) { policy_->BeginReadWholeAdapter(Now(now)); }
  void set_end(double end) { policy_->SetEnd(Offset(end)); }

  // {action: 'send'|'read'|'wait'|'done'|'fail', deadline, url, range, authorization, status}; on 'fail' the
  // error is in errorJson() / errorText().
  val next(double now) {
    net::HttpStep step = policy_->Next(Now(now));
    val out = val::object();
    static constexpr const char* kNames[] = {"send", "read", "wait", "done", "fail"};
    out.set("action", kNames[static_cast<int>(step.action)]);
    out.set("deadline", static_cast<double>(step.deadline_ms));
    if (step.action == net::HttpAction::kSend) {
      out.set("url", step.request.url);
      out.set("range", step.request.range);
      out.set("authorization", step.request.authorization);
    }
    if (step.error) {
      error_ = *step.error;
      out.set("status", policy_->failed_status());
    }
    return out;
  }

  void on_head(double now, int status, const std::string& headers, const std::string& final_url) {
    net::HttpHead head;
    head.status = status;
    head.final_url = final_url;
    std::string_view rest = headers;
    while (!rest.empty()) {
      size_t a = rest.find('\n');
      if (a == std::string_view::npos) break;
      size_t b = rest.find('\n', a + 1);
      std::string_view name = rest.substr(0, a);
      std::string value(rest.substr(a + 1, (b == std::string_view::npos ? rest.size() : b) - a - 1));
      rest.remove_prefix(b == std::string_view::npos ? rest.size() : b + 1);
      if (name == "content-range") head.content_range = value;
      else if (name == "content-length") head.content_length = value;
      else if (name == "content-encoding") head.content_encoding = value;
      else if (name == "etag") head.etag = value;
      else if (name == "retry-after") head.retry_after = value;
      else if (name == "date") head.date = value;
      else if (name == "x-error-message") head.error_message = value;
      else if (name == "location") head.location = value;
      else if (name == "x-repo-commit") head.repo_commit = value;
    }
    policy_->OnHead(Now(now), head);
  }

  // How many bytes of the chunk to deliver; skip() tells how many to drop before them.
  double on_body(double now, double length) {
    net::BodySlice slice = policy_->OnBody(Now(now), Offset(length));
    skip_ = static_cast<double>(slice.skip);
    return static_cast<double>(slice.take);
  }
  double skip() const { return skip_; }
  void on_body_end(double now) { policy_->OnBodyEnd(Now(now)); }
  void on_transport_error(double now, int kind) {
    policy_->OnTransportError(Now(now), static_cast<net::TransportError>(std::clamp(kind, 0, 4)));
  }
  void on_timer(double now) { policy_->OnTimer(Now(now)); }
  void on_closed() { policy_->OnClosed(); }
  bool in_flight() const { return policy_->InFlight(); }
  double deadline() const { return static_cast<double>(policy_->deadline_ms()); }
  double position() const { return static_cast<double>(policy_->position()); }
  double size() const { return policy_->size() ? static_cast<double>(*policy_->size()) : -1; }
  std::string etag() const { return policy_->etag().value_or(""); }
  std::string commit() const { return policy_->commit().value_or(""); }
  double requests() const { return policy_->requests(); }
  double max_json_bytes() const { return static_cast<double>(policy_->limits().max_json_bytes); }

 private:
  explicit HttpFile(net::HttpFilePolicy policy) : policy_(std::move(policy)) {}
  static int64_t Now(double now) { return static_cast<int64_t>(now); }

  std::optional<net::HttpFilePolicy> policy_;
  std::optional<Error> error_;
  double skip_ = 0;
};

// The deadlines of one call that is not a file read (net::HttpCallClock), for web/src/remote/push.js: the same limits
// (PB_HTTP_* lines) and messages as the native CLI's push.
class HttpCall {
 public:
  HttpCall(std::string what, std::string limits_text, double now) {
    auto parsed = LimitsFromText(limits_text);
    if (!parsed.ok()) error_ = parsed.error();
    else clock_.emplace(parsed.value(), std::move(what), static_cast<int64_t>(now));
  }
  bool ok() const { return clock_.has_value(); }
  std::string error_json() const { return error_ ? RenderErrorJson(*error_) : std::string(); }
  std::string error_text() const { return error_ ? RenderErrorText(*error_) : std::string(); }
  void begin_attempt(double now) { clock_->BeginAttempt(static_cast<int64_t>(now)); }
  void on_progress(double now, double bytes) {
    clock_->OnProgress(static_cast<int64_t>(now), static_cast<uint64_t>(std::max(0.0, bytes)));
  }
  void on_head(double now) { clock_->OnHead(static_cast<int64_t>(now)); }
  double deadline() const { return static_cast<double>(clock_->deadline_ms()); }
  // True when the attempt failed (the error in errorJson(); total() tells whether the call's deadline passed).
  bool expired(double now) {
    auto e = clock_->Expired(static_cast<int64_t>(now), &total_);
    if (e) error_ = *e;
    return e.has_value();
  }
  bool total() const { return total_; }
  // The one retry decision (net/http_retry.h) after a failed attempt: `status` 0 for a failure without an answer,
  // `kind` then the TransportError; `retry_after` / `date` the answer's headers (null when absent). Answers
  // {retry, wait (ms), reason ("" or why it gives up, for the error's end)}.
  val decide_retry(double now, int status, int kind, const val& retry_after, const val& date, double failures) const {
    net::AttemptFailure what{.status = status, .transport = static_cast<net::TransportError>(std::clamp(kind, 0, 4))};
    if (retry_after.isString()) what.retry_after = retry_after.as<std::string>();
    if (date.isString()) what.date = date.as<std::string>();
    const net::RetryDecision d =
        clock_->DecideRetry(static_cast<int64_t>(now), what, static_cast<uint32_t>(std::max(0.0, failures)));
    val out = val::object();
    out.set("retry", d.retry());
    out.set("wait", static_cast<double>(d.wait_ms));
    out.set("reason", d.reason);
    return out;
  }
  double max_json_bytes() const { return static_cast<double>(clock_->limits().max_json_bytes); }

 private:
  std::optional<net::HttpCallClock> clock_;
  std::optional<Error> error_;
  bool total_ = false;
};

std::string UrlOriginOf(const std::string& url) { return net::UrlOrigin(url); }

// net::ChooseWorkerEndpoint: {ok: true, endpoint, own}, or the failure value. `requested` null or undefined: none.
val WorkerEndpointOf(val requested, const std::string& home, const std::string& allowed) {
  std::optional<std::string> asked;
  if (requested.isString()) asked = requested.as<std::string>();
  auto chosen = net::ChooseWorkerEndpoint(asked, home, allowed);
  if (!chosen.ok()) return FailureValue(chosen.error());
  val r = val::object();
  r.set("ok", true);
  r.set("endpoint", chosen->endpoint);
  r.set("own", chosen->own);
  return r;
}

}  // namespace
}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge_http) {
  using namespace emscripten;
  using namespace pb::wasm;
  class_<HttpFile>("HttpFile")
      .constructor<std::string, std::string, std::string, std::string, std::string>()
      .function("ok", &HttpFile::ok)
      .function("reader", &HttpFile::reader)
      .function("parallelReads", &HttpFile::parallel_reads)
      .function("errorJson", &HttpFile::error_json)
      .function("errorText", &HttpFile::error_text)
      .function("beginRead", &HttpFile::begin_read)
      .function("beginReadWhole", &HttpFile::begin_read_whole)
      .function("beginReadWholeAdapter", &HttpFile::begin_read_whole_adapter)
      .function("setEnd", &HttpFile::set_end)
      .function("next", &HttpFile::next)
      .function("onHead", &HttpFile::on_head)
      .function("onBody", &HttpFile::on_body)
      .function("skip", &HttpFile::skip)
      .function("onBodyEnd", &HttpFile::on_body_end)
      .function("onTransportError", &HttpFile::on_transport_error)
      .function("onTimer", &HttpFile::on_timer)
      .function("onClosed", &HttpFile::on_closed)
      .function("inFlight", &HttpFile::in_flight)
      .function("deadline", &HttpFile::deadline)
      .function("position", &HttpFile::position)
      .function("size", &HttpFile::size)
      .function("etag", &HttpFile::etag)
      .function("commit", &HttpFile::commit)
      .function("requests", &HttpFile::requests)
      .function("maxJsonBytes", &HttpFile::max_json_bytes);
  class_<HttpCall>("HttpCall")
      .constructor<std::string, std::string, double>()
      .function("ok", &HttpCall::ok)
      .function("errorJson", &HttpCall::error_json)
      .function("errorText", &HttpCall::error_text)
      .function("beginAttempt", &HttpCall::begin_attempt)
      .function("onProgress", &HttpCall::on_progress)
      .function("onHead", &HttpCall::on_head)
      .function("deadline", &HttpCall::deadline)
      .function("expired", &HttpCall::expired)
      .function("total", &HttpCall::total)
      .function("decideRetry", &HttpCall::decide_retry)
      .function("maxJsonBytes", &HttpCall::max_json_bytes);
  function("urlOrigin", &UrlOriginOf);
  function("workerEndpoint", &WorkerEndpointOf);
}
