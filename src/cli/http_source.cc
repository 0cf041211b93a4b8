#include "cli/http_source.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "core/reader.h"
#include "net/http_policy.h"
#include "net/http_url.h"
#include "net/remote_address.h"

#ifndef PB_VERSION
#define PB_VERSION "dev"
#endif

namespace pb::cli {
namespace {

// The constants, messages and checks below mirror web/src/remote/hub.js: both CLIs must agree byte for byte.
constexpr uint64_t kFirstRange = 64 * 1024;     // nearly every header fits: one request is the usual cost
constexpr uint64_t kRemotePiece = 64ull << 20;  // one request of a long read (RemoteReader::Stream)

Error Io(std::string message) { return MakeError(ErrorCode::IoError, std::move(message)); }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return std::string(s);
}

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

// HF_TOKEN, else the token file huggingface_hub writes: $HF_TOKEN_PATH, else $HF_HOME/token, else
// $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token. web/bin/peft-bridge.mjs reads the same.
std::string HubToken() {
  std::string token = Trim(GetEnv("HF_TOKEN"));
  if (!token.empty()) return token;
  std::string path = GetEnv("HF_TOKEN_PATH");
  if (path.empty()) {
    std::string home = GetEnv("HF_HOME");
    if (home.empty()) {
      std::string cache = GetEnv("XDG_CACHE_HOME");
      if (cache.empty() && !GetEnv("HOME").empty()) cache = GetEnv("HOME") + "/.cache";
      if (!cache.empty()) home = cache + "/huggingface";
    }
    if (!home.empty()) path = home + "/token";
  }
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return Trim(text);
}

// The PB_HTTP_* variables (docs/remote.md): both CLIs read the same ones and the policy checks them.
net::TransportError CurlTransportError(int code) {
  switch (static_cast<CURLcode>(code)) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return net::TransportError::kResolve;
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT: return net::TransportError::kConnect;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE: return net::TransportError::kTls;
    case CURLE_UNSUPPORTED_PROTOCOL: return net::TransportError::kBadScheme;
    default: return net::TransportError::kBroken;
  }
}

Result<net::HttpLimits> LimitsFromEnv() {
  net::HttpLimits limits;
  for (std::string_view name : net::HttpLimitNames()) {
    std::string value = GetEnv(std::string(name).c_str());
    if (value.empty()) continue;
    PB_RETURN_IF_ERROR(net::SetHttpLimit(limits, name, value));
  }
  return limits;
}

// libcurl as a transport of the policy (net/http_policy.h): it sends what Next() says, without following
// redirects (the policy follows them, scoping the token per hop as the JS transport does), and reports heads,
// body chunks, ends, failures and deadlines. It reads with the multi interface so that the policy's deadlines are
// kept to the millisecond rather than curl's once-a-second progress calls. One transport keeps its connection
// between reads, so a file read in pieces costs one connection.
class CurlTransport {
 public:
  using Deliver = RemoteReader::Deliver;

  CurlTransport() {
    static const bool initialized = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    (void)initialized;
    easy_ = curl_easy_init();
    multi_ = curl_multi_init();
  }
  ~CurlTransport() {
    if (multi_) curl_multi_cleanup(multi_);
    if (easy_) curl_easy_cleanup(easy_);
  }
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  // Runs the policy's current read to its end: Ok once it has its bytes (handed to `deliver`), else its error
  // (the policy's, or the first one `deliver` returned, which ends the read at once).
  Status Run(net::HttpFilePolicy& policy, const Deliver& deliver, const std::string& label) {
    if (!easy_ || !multi_) return Io("cannot read `" + label + "`: cannot initialise libcurl");
    policy.OnClosed();  // no body outlives a Run here
    Status delivered = Status::Ok();
    for (;;) {
      net::HttpStep step = policy.Next(NowMs());
      switch (step.action) {
        case net::HttpAction::kDone: return Status::Ok();
        case net::HttpAction::kFail: return *step.error;
        case net::HttpAction::kWait:
          std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(0, step.deadline_ms - NowMs())));
          break;
        case net::HttpAction::kRead: policy.OnClosed(); break;  // not reached: every transfer ends in Perform
        case net::HttpAction::kSend:
          Perform(policy, step, deliver, delivered);
          if (!delivered.ok()) {
            policy.OnClosed();
            return delivered;
          }
          break;
      }
    }
  }

 private:
  struct Transfer {
    net::HttpFilePolicy* policy;
    const Deliver* deliver;
    Status* delivered;  // the first error `deliver` returned
    net::HttpHead head{};
    bool head_done = false;
    bool stopped = false;  // ended on purpose: the policy no longer wanted it
  };

  static size_t OnHeader(char* data, size_t size, size_t count, void* user) {
    auto& t = *static_cast<Transfer*>(user);
    std::string line = Trim(std::string_view(data, size * count));
    if (line.starts_with("HTTP/")) {
      t.head = net::HttpHead{};  // a new answer (after a 1xx)
      size_t sp = line.find(' ');
      if (sp != std::string::npos) t.head.status = std::atoi(line.substr(sp + 1, 3).c_str());
    } else if (line.empty()) {
      if (t.head.status < 200) return size * count;  // an informational answer: the real one follows
      t.head_done = true;
      t.policy->OnHead(NowMs(), t.head);
      if (!t.policy->InFlight()) {
        t.stopped = true;
        return 0;  // a redirect, an error status or a refused answer: its body is not wanted
      }
    } else if (size_t colon = line.find(':'); colon != std::string::npos) {
      std::string name = Lower(line.substr(0, colon));
      std::string value = Trim(std::string_view(line).substr(colon + 1));
      if (name == "content-range") t.head.content_range = value;
      else if (name == "content-length") t.head.content_length = value;
      else if (name == "content-encoding") t.head.content_encoding = value;
      else if (name == "etag") t.head.etag = value;
      else if (name == "retry-after") t.head.retry_after = value;
      else if (name == "date") t.head.date = value;
      else if (name == "x-error-message") t.head.error_message = value;
      else if (name == "location") t.head.location = value;
      else if (name == "x-repo-commit") t.head.repo_commit = value;
    }
    return size * count;
  }

  static size_t OnWrite(char* data, size_t size, size_t count, void* user) {
    auto& t = *static_cast<Transfer*>(user);
    size_t n = size * count;
    net::BodySlice slice = t.policy->OnBody(NowMs(), n);
    if (slice.take > 0) {
      *t.delivered =
          (*t.deliver)(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data) + slice.skip, slice.take));
      if (!t.delivered->ok()) {
        t.stopped = true;
        return 0;  // the bytes' consumer failed (a full disk, a refused tensor): the read ends with its error
      }
    }
    if (!t.policy->InFlight()) {
      t.stopped = true;
      return 0;  // enough (a server ignoring Range would send the whole file), or a failure
    }
    return n;
  }

  void Perform(net::HttpFilePolicy& policy, const net::HttpStep& step, const Deliver& deliver, Status& delivered) {
    Transfer t{.policy = &policy, .deliver = &deliver, .delivered = &delivered};
    curl_slist* headers = nullptr;
    if (!step.request.authorization.empty())
      headers = curl_slist_append(headers, ("Authorization: " + step.request.authorization).c_str());
    std::string range = step.request.range.substr(std::string_view("bytes=").size());
    curl_easy_reset(easy_);
    curl_easy_setopt(easy_, CURLOPT_URL, step.request.url.c_str());
    curl_easy_setopt(easy_, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy_, CURLOPT_FOLLOWLOCATION, 0L);  // the policy follows redirects, hop by hop
    curl_easy_setopt(easy_, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy_, CURLOPT_USERAGENT, "peft-bridge/" PB_VERSION);
    curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy_, CURLOPT_HEADERFUNCTION, &CurlTransport::OnHeader);
    curl_easy_setopt(easy_, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &CurlTransport::OnWrite);
    curl_easy_setopt(easy_, CURLOPT_WRITEDATA, &t);
    curl_multi_add_handle(multi_, easy_);
    std::optional<CURLcode> rc;
    for (;;) {
      int running = 0;
      curl_multi_perform(multi_, &running);
      while (CURLMsg* msg = curl_multi_info_read(multi_, &running))
        if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
      if (rc || t.stopped) break;
      int64_t now = NowMs();
      if (now >= policy.deadline_ms()) {
        policy.OnTimer(now);  // an idle or too slow transfer, or the read's deadline
        if (!policy.InFlight()) break;
        continue;
      }
      int wait = static_cast<int>(std::clamp<int64_t>(policy.deadline_ms() - now, 1, 1000));
      curl_multi_poll(multi_, nullptr, 0, wait, nullptr);
    }
    curl_multi_remove_handle(multi_, easy_);
    curl_slist_free_all(headers);
    if (t.stopped || !rc || !policy.InFlight()) return;
    int64_t now = NowMs();
    if (*rc == CURLE_OK) {
      if (!t.head_done) policy.OnTransportError(now, net::TransportError::kBroken);
      else policy.OnBodyEnd(now);
    } else {
      policy.OnTransportError(now, CurlTransportError(*rc));
    }
  }

  CURL* easy_ = nullptr;
  CURLM* multi_ = nullptr;
};

namespace {

class IgnoreEvents final : public ReaderEvents {
 public:
  Status OnHeader(const Header&) override { return Status::Ok(); }
  Status OnTensorData(size_t, uint64_t, std::span<const uint8_t>) override { return Status::Ok(); }
};

}  // namespace

bool IsRemoteAddress(const std::string& arg) { return net::IsRemoteArgument(arg); }

std::string HubEndpoint() {
  std::string e = GetEnv("HF_ENDPOINT");
  if (e.empty()) e = std::string(net::kDefaultHubEndpoint);
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

Result<net::RemoteAddress> ParseRemote(const std::string& arg) { return net::ParseRemoteAddress(arg, HubEndpoint()); }

namespace {

// The policy for one file: the PB_HTTP_* limits, and the token for the Hub endpoint's origin only (the policy
// checks every hop), never for another server.
Result<net::HttpFilePolicy> OpenPolicy(const net::RemoteFile& file) {
  PB_ASSIGN_OR_RETURN(auto limits, LimitsFromEnv());
  return net::HttpFilePolicy::Open(
      {.url = file.url, .label = file.label, .token = HubToken(), .token_origin = net::UrlOrigin(HubEndpoint())},
      limits);
}

}  // namespace

Result<RemoteReader> RemoteReader::Open(const net::RemoteFile& file) {
  PB_ASSIGN_OR_RETURN(auto policy, OpenPolicy(file));
  return RemoteReader(file, std::move(policy));
}

RemoteReader::RemoteReader(net::RemoteFile file, net::HttpFilePolicy policy)
    : file_(std::move(file)),
      policy_(std::make_unique<net::HttpFilePolicy>(std::move(policy))),
      transport_(std::make_unique<CurlTransport>()) {}
RemoteReader::RemoteReader(RemoteReader&&) noexcept = default;
RemoteReader::~RemoteReader() = default;

std::optional<uint64_t> RemoteReader::size() const { return policy_->size(); }
const std::optional<std::string>& RemoteReader::commit() const { return policy_->commit(); }
int RemoteReader::failed_status() const { return policy_->failed_status(); }

Status RemoteReader::ReadWhole(WholeCap cap, const Deliver& deliver) {
  if (cap == WholeCap::kAdapter) policy_->BeginReadWholeAdapter(NowMs());
  else policy_->BeginReadWhole(NowMs());
  return transport_->Run(*policy_, deliver, file_.label);
}

Status RemoteReader::Stream(uint64_t start, uint64_t end, const Deliver& deliver) {
  // In pieces of kRemotePiece, each its own request on the kept connection: the policy's deadline (PB_HTTP_TOTAL_MS)
  // bounds one read, and a multi-GB shard must not have to arrive within it.
  for (uint64_t pos = start; pos < end;) {
    const uint64_t stop = end == net::kUnbounded || !policy_->size() ? end : std::min(end, pos + kRemotePiece);
    policy_->BeginRead(pos, stop, NowMs());
    PB_RETURN_IF_ERROR(transport_->Run(*policy_, deliver, file_.label));
    if (policy_->position() == pos) break;  // the end of the file
    pos = policy_->position();
  }
  return Status::Ok();
}

Result<Header> RemoteReader::ReadHeader() {
  const std::string& arg = file_.label;
  net::HttpFilePolicy& policy = *policy_;
  // The header ends at 8 + N, N being the first 8 bytes. A length the core will refuse (too large, or past the
  // end of the file) is not fetched: the core reports it from the prefix.
  std::vector<uint8_t> head;
  auto deliver = [&](std::span<const uint8_t> bytes) {
    head.insert(head.end(), bytes.begin(), bytes.end());
    if (head.size() < 8) return Status::Ok();
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];
    bool refused = n > kMaxHeaderSize || (policy.size() && 8 + n > *policy.size());
    policy.SetEnd(refused ? 8 : 8 + n);
    return Status::Ok();
  };
  policy.BeginRead(0, kFirstRange, NowMs());
  PB_RETURN_IF_ERROR(transport_->Run(policy, deliver, arg));

  // The core validates the bytes exactly as a local file of this size (or as a stream when the size is unknown).
  StreamingReader reader(ReaderOptions{.total_size = policy.size()});
  IgnoreEvents events;
  size_t pos = 0;
  while (!reader.header_done() && pos < head.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(reader.bytes_until_header(), head.size() - pos));
    if (n == 0) break;
    PB_RETURN_IF_ERROR(reader.Feed(std::span<const uint8_t>(head.data() + pos, n), events));
    pos += n;
  }
  if (!reader.header_done()) {
    PB_RETURN_IF_ERROR(reader.Finish(events));
    return Io("cannot read `" + arg + "`: the header is incomplete");
  }
  return *reader.header();
}

Result<RemoteBytes> ReadRemoteWhole(const net::RemoteFile& file, WholeCap cap, int* failed_status) {
  PB_ASSIGN_OR_RETURN(auto reader, RemoteReader::Open(file));
  RemoteBytes out;
  auto deliver = [&](std::span<const uint8_t> bytes) {
    out.bytes.insert(out.bytes.end(), bytes.begin(), bytes.end());
    return Status::Ok();
  };
  if (Status s = reader.ReadWhole(cap, deliver); !s.ok()) {
    if (failed_status) *failed_status = reader.failed_status();
    return s.error();
  }
  out.commit = reader.commit();
  return out;
}

Result<Header> ReadRemoteHeader(const std::string& arg) {
  PB_ASSIGN_OR_RETURN(auto address, ParseRemote(arg));
  return ReadRemoteHeader(net::RemoteSelf(address));
}

Result<Header> ReadRemoteHeader(const net::RemoteFile& file) {
  PB_ASSIGN_OR_RETURN(auto reader, RemoteReader::Open(file));
  return reader.ReadHeader();
}

}  // namespace pb::cli
