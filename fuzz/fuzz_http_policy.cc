// libFuzzer target for the HTTP policy (src/net/http_policy.h) and the URL rules it uses (http_url.h): a
// hostile or broken server, played from the fuzz input against the state machine both CLIs and the JS API use.
//
// Input: part 0 = the target URL, part 1 = the token origin (optional), part 2 = a script of bytes. The script
// picks the read to begin (ranged or whole, with its offsets), then, step by step, what the "server" and the
// "transport" do: an answer (status, Content-Range, Content-Length, ETag, Retry-After, Location and final URL
// drawn from the script, some well formed and some not), a body chunk, the body's end, a transport error, or a
// timer. The clock only moves forward: to each wait's deadline, or by a scripted amount.
//
// Oracles (abort() on failure):
//   - Open refuses exactly the URLs that are not http(s) or carry user info (as UrlScheme/UrlHasUserInfo say);
//   - the token is sent only to the token origin: a request with Authorization goes to UrlOrigin == origin;
//   - every request's Range starts at the byte the read has reached ("bytes=<position>-...");
//   - a body chunk's skip + take never exceed the chunk, and the bytes taken are contiguous: position() moves by
//     exactly `take`, never past the read's end or the file's size once known;
//   - kWait's deadline is not in the past; kDone means position() reached the end asked for (or the file's size);
//   - kFail carries an error with a message of bounded length (server text is clipped: no 10 MB messages);
//   - the loop ends: each step consumes script bytes, and the policy's deadlines bound the waits;
//   - the edge worker's allow-list: the worker's own exactly where the origins agree, an allowed origin only
//     one the list names (here it always names the URL's), refusals clipped.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_input.h"
#include "json_mutator.h"
#include "net/http_policy.h"
#include "net/http_url.h"
#include "net/worker_endpoint.h"

namespace {

using pb::net::HttpAction;
using pb::net::HttpFilePolicy;
using pb::net::HttpHead;

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_http_policy: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

class Script {
 public:
  explicit Script(std::string_view bytes) : s_(bytes) {}
  bool empty() const { return i_ >= s_.size(); }
  uint8_t Byte() { return i_ < s_.size() ? static_cast<uint8_t>(s_[i_++]) : 0; }
  uint64_t Number() {  // small numbers mostly, a huge one now and then
    uint8_t kind = Byte();
    if (kind < 200) return Byte();
    if (kind < 250) return (uint64_t{Byte()} << 8) | Byte();
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v = (v << 8) | Byte();
    return v;
  }
  // A short piece of the script as text (for header values the byte choices do not build).
  std::string Text() {
    size_t n = Byte() % 24;
    std::string out(s_.substr(std::min(i_, s_.size()), n));
    i_ += n;
    return out;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

std::optional<std::string> Header(Script& s, const std::string& well_formed) {
  switch (s.Byte() % 4) {
    case 0: return std::nullopt;
    case 1: return s.Text();
    default: return well_formed;
  }
}

HttpHead Answer(Script& s, uint64_t position) {
  static constexpr int kStatuses[] = {200, 206, 206, 206, 301, 302, 307, 308, 404,
                                      403, 401, 416, 429, 500, 503, 408, 204, 0};
  HttpHead head;
  head.status = kStatuses[s.Byte() % (sizeof kStatuses / sizeof kStatuses[0])];
  const uint64_t a = s.Byte() % 2 ? position : s.Number();
  const uint64_t b = a + s.Number();
  const uint64_t total = b + s.Number();
  head.content_range = Header(s, head.status == 416 ? "bytes */" + std::to_string(total)
                                                    : "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                          (s.Byte() % 8 ? std::to_string(total) : std::string("*")));
  head.content_length = Header(s, std::to_string(b - a + 1));
  head.etag = Header(s, s.Byte() % 4 ? "\"abc\"" : "\"changed\"");
  head.retry_after = Header(s, std::to_string(s.Byte() % 20));
  head.location = Header(s, s.Byte() % 2 ? "/next/file" : "https://cdn.example/blob?x=1");
  if (s.Byte() % 8 == 0) head.location = std::string(s.Number() % 100'000, 'L');       // a huge Location
  if (s.Byte() % 8 == 0) head.error_message = std::string(s.Number() % 100'000, 'E');  // a huge server message
  if (s.Byte() % 8 == 0) head.final_url = s.Byte() % 2 ? "https://other.example/x" : s.Text();
  head.repo_commit = Header(s, "0123456789abcdef0123456789abcdef01234567");
  return head;
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {"https://hub.example/m/resolve/main/model.safetensors", "http://127.0.0.1:8080/x", "https://u:p@host/x",
     "ftp://host/x", "HTTPS://HUB.EXAMPLE:443/", "//host/path", "/abs", "rel/x", "https://hub.example"},
    {"bytes 0-7/100", "bytes */100", "\"etag\"", "W/\"weak\"", "Retry-After", "-", "/", "*"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 3);
  const std::string url(parts[0]);
  const std::string origin = parts.size() > 1 ? std::string(parts[1]) : pb::net::UrlOrigin(url);
  Script s(parts.size() > 2 ? parts[2] : std::string_view());

  // URL rules: total on any text.
  (void)pb::net::ResolveUrl(url, origin);
  const std::string scheme = pb::net::UrlScheme(url);
  const bool acceptable = (scheme == "http" || scheme == "https") && !pb::net::UrlOrigin(url).empty() &&
                          !pb::net::UrlHasUserInfo(url);

  // The edge worker's allow-list (net/worker_endpoint.h): the URL asked for against the token origin as the
  // worker's home, and a list that names the URL's origin beside an unusable entry (the script is not read, so the
  // policy below sees the same script). The worker's own exactly where the origins agree; an allowed origin is one
  // the list names; every refusal is clipped.
  {
    const std::string list = "ftp://unusable, " + pb::net::UrlOrigin(url);
    auto chosen = pb::net::ChooseWorkerEndpoint(url, origin, list);
    const std::string home = pb::net::HttpOrigin(origin), asked = pb::net::HttpOrigin(url);
    if (chosen.ok() && chosen->own != (asked == home || url.empty())) Fail("worker endpoint: own disagrees", url);
    if (chosen.ok() && !chosen->own && (chosen->endpoint != asked || asked.empty()))
      Fail("worker endpoint: allowed an origin the list does not name", url);
    if (!home.empty() && !asked.empty() && !chosen.ok() && asked.find_first_of(", \t\r\n") == std::string::npos)
      Fail("worker endpoint: refused an http(s) origin the list names", url);
    if (!chosen.ok() && chosen.error().message.size() > 4000)
      Fail("worker endpoint: a refusal is not clipped", chosen.error().message.substr(0, 300));
  }

  pb::net::HttpLimits limits;
  limits.retries = s.Byte() % 4;
  limits.max_redirects = s.Byte() % 4;
  limits.backoff_ms = s.Byte();
  auto opened = HttpFilePolicy::Open({url, "file", "secret", origin}, limits);
  if (opened.ok() != acceptable) Fail(std::string("Open ") + (opened.ok() ? "accepted" : "refused") + " the URL", url);
  if (!opened.ok()) {
    if (opened.error().message.size() > 1000)
      Fail("an Open error is not clipped", opened.error().message.substr(0, 300));
    return 0;
  }
  HttpFilePolicy policy = std::move(opened.value());

  int64_t now = 1'000;
  for (int read = 0; read < 4 && !s.empty(); ++read) {
    const bool whole = s.Byte() % 4 == 0;
    const uint64_t start = whole ? 0 : s.Number();
    const uint64_t end = s.Byte() % 8 == 0 ? pb::net::kUnbounded : start + s.Number();
    if (whole) policy.BeginReadWhole(now, s.Byte() % 2 ? std::optional<uint64_t>(s.Number()) : std::nullopt);
    else policy.BeginRead(start, end, now);

    for (int step = 0; step < 64; ++step) {
      auto next = policy.Next(now);
      if (next.action == HttpAction::kFail) {
        if (!next.error || next.error->message.empty()) Fail("kFail without an error message");
        if (next.error->message.size() > 2000)
          Fail("an error message is not clipped", next.error->message.substr(0, 300));
        break;
      }
      if (next.action == HttpAction::kDone) {
        const uint64_t stop = whole ? policy.size().value_or(policy.position())
                                    : std::min(end, policy.size().value_or(end));
        if (policy.position() < stop) Fail("kDone before the end of the read");
        break;
      }
      if (next.action == HttpAction::kWait) {
        if (next.deadline_ms < now) Fail("a wait in the past");
        now = next.deadline_ms;
        continue;
      }
      if (next.action == HttpAction::kSend) {
        const auto& r = next.request;
        if (!r.authorization.empty() && pb::net::UrlOrigin(r.url) != origin)
          Fail("the token went to another origin", r.url + " (token origin " + origin + ")");
        if (!r.range.starts_with("bytes=" + std::to_string(policy.position()) + "-"))
          Fail("the Range does not start at the position", r.range + " at " + std::to_string(policy.position()));
      }
      if (s.empty()) {  // the script is over: the connection drops
        policy.OnTransportError(now, pb::net::TransportError::kBroken);
        continue;
      }
      now += s.Byte() % 3 == 0 ? static_cast<int64_t>(s.Number() % 1'000'000) : 1;
      switch (s.Byte() % 8) {
        case 0:
        case 1:
        case 2: policy.OnHead(now, Answer(s, policy.position())); break;
        case 3:
        case 4: {
          const uint64_t before = policy.position(), length = s.Number() % (1u << 20);
          auto slice = policy.OnBody(now, length);
          if (slice.skip + slice.take > length) Fail("a slice larger than its chunk");
          if (policy.position() != before + slice.take) Fail("position did not move by the bytes taken");
          if (!whole && policy.position() > end) Fail("a ranged read went past its end");
          if (policy.size() && policy.position() > *policy.size()) Fail("position past the file's size");
          break;
        }
        case 5: policy.OnBodyEnd(now); break;
        case 6: policy.OnTransportError(now, static_cast<pb::net::TransportError>(s.Byte() % 5)); break;
        default:
          policy.OnTimer(std::max(now, next.deadline_ms));
          now = std::max(now, next.deadline_ms);
          break;
      }
    }
    policy.OnClosed();
  }
  return 0;
}
