#include "cli/http_source.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "core/reader.h"

#ifndef PB_VERSION
#define PB_VERSION "dev"
#endif

namespace pb::cli {
namespace {

// The constants, messages and checks below mirror web/src/hub.js: both CLIs must agree byte for byte.
constexpr std::string_view kDefaultEndpoint = "https://huggingface.co";
constexpr uint64_t kFirstRange = 64 * 1024;  // nearly every header fits: one request is the usual cost
constexpr int kRetries = 5;
constexpr long kRetryDelayMs = 250;  // doubled on each retry, up to kMaxBackoffMs
constexpr long kMaxBackoffMs = 8000;
constexpr long kMaxRetryAfter = 10;  // seconds: a server asking for a longer pause gets an error now instead
constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

Error Invalid(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }
Error Io(std::string message) { return MakeError(ErrorCode::IoError, std::move(message)); }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && Lower(s.substr(0, prefix.size())) == prefix;
}

// JavaScript's encodeURIComponent, so both CLIs request the same URL.
std::string EncodeComponent(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                (c != 0 && std::strchr("-_.!~*'()", c) != nullptr);
    if (keep) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// '.' and '..' segments would be resolved away by URL parsing and address another file.
Status CheckSegments(std::string_view what, const std::string& value) {
  if (value.empty()) return Invalid(std::string(what) + " must be a non-empty string");
  for (const std::string& s : Split(value, '/'))
    if (s.empty() || s == "." || s == "..")
      return Invalid(std::string(what) + " `" + value + "` has an empty, '.' or '..' segment");
  return Status::Ok();
}

std::string EncodeSegments(const std::string& path) {
  std::string out;
  for (const std::string& s : Split(path, '/')) out += (out.empty() ? "" : "/") + EncodeComponent(s);
  return out;
}

std::string Endpoint() {
  const char* env = std::getenv("HF_ENDPOINT");
  std::string e = env && *env ? env : std::string(kDefaultEndpoint);
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

// hf://owner/repo/path[@revision] → {endpoint}/{repo}/resolve/{revision}/{path}. The revision follows the last
// '@' of the path and is encoded as one segment (refs/pr/1 → refs%2Fpr%2F1), as the Hub expects.
Result<std::string> HubUrlFor(const std::string& text) {
  std::vector<std::string> parts = Split(std::string_view(text).substr(5), '/');
  if (parts.size() < 3) return Invalid("`" + text + "` must look like hf://owner/repo/path[@revision]");
  std::string repo = parts[0] + "/" + parts[1];
  std::string path;
  for (size_t i = 2; i < parts.size(); ++i) path += (i > 2 ? "/" : "") + parts[i];
  std::string revision = "main";
  if (size_t at = path.rfind('@'); at != std::string::npos) {
    revision = path.substr(at + 1);
    path.resize(at);
    if (revision.empty()) return Invalid("`" + text + "` has an empty revision");
  }
  if (Status s = CheckSegments("repo", repo); !s.ok()) return s.error();
  if (Status s = CheckSegments("path", path); !s.ok()) return s.error();
  return Endpoint() + "/" + EncodeSegments(repo) + "/resolve/" + EncodeComponent(revision) + "/" + EncodeSegments(path);
}

// scheme://host[:port] in lower case, without user info or a default port ("" if `url` has no scheme): a URL's
// origin, to decide whether HF_TOKEN may go to it.
std::string Origin(std::string_view url) {
  size_t p = url.find("://");
  if (p == std::string_view::npos) return "";
  std::string scheme = Lower(url.substr(0, p));
  std::string_view rest = url.substr(p + 3);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string host = Lower(authority);
  if ((scheme == "https" && host.ends_with(":443")) || (scheme == "http" && host.ends_with(":80")))
    host.resize(host.rfind(':'));
  return scheme + "://" + host;
}

std::optional<uint64_t> ParseU64(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// The final answer's headers (a redirect's are dropped when the next status line arrives).
struct Response {
  long status = 0;
  std::optional<std::string> content_range, content_length, content_encoding, etag, retry_after, error_message;
};

// One request's outcome: an error (transient ones are retried), or success; `eof` when nothing is left at pos.
struct Outcome {
  std::optional<Error> error{};
  bool transient = false;
  std::optional<long> retry_after{};
  bool eof = false;
};

class HttpFile {
 public:
  using Grow = std::function<uint64_t(std::span<const uint8_t>)>;

  HttpFile(std::string url, std::string label, std::string token)
      : url_(std::move(url)), label_(std::move(label)), token_(std::move(token)) {
    static const bool initialized = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    (void)initialized;
    curl_ = curl_easy_init();
    if (!token_.empty()) headers_ = curl_slist_append(nullptr, ("Authorization: Bearer " + token_).c_str());
  }
  ~HttpFile() {
    curl_slist_free_all(headers_);
    if (curl_) curl_easy_cleanup(curl_);
  }
  HttpFile(const HttpFile&) = delete;
  HttpFile& operator=(const HttpFile&) = delete;

  std::optional<uint64_t> size() const { return size_; }

  // Appends bytes [start, end) of the file (clamped to its size) to `out`, retrying from the byte reached.
  // `grow(out)` may move `end` once bytes arrive: the header's end is known only from its first 8 bytes, and a
  // server that ignored Range keeps streaming, so the same answer is read on to it.
  Status FetchRange(uint64_t start, uint64_t end, std::vector<uint8_t>& out, const Grow& grow = {}) {
    if (!curl_) return Io("cannot read `" + label_ + "`: cannot initialise libcurl");
    Transfer t{.file = this, .out = &out, .pos = start, .end = end, .grow = &grow};
    int failures = 0;
    for (;;) {
      if (t.pos >= t.Stop()) break;
      uint64_t before = t.pos;
      Outcome o = Request(t);
      if (t.pos > before) failures = 0;
      if (!o.error) {
        if (o.eof) break;
        continue;
      }
      if (!o.transient || failures >= kRetries || (o.retry_after && *o.retry_after > kMaxRetryAfter)) return *o.error;
      ++failures;
      long ms = o.retry_after ? *o.retry_after * 1000 : std::min(kRetryDelayMs << (failures - 1), kMaxBackoffMs);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    return Status::Ok();
  }

 private:
  // State of one FetchRange call and of the request in flight.
  struct Transfer {
    HttpFile* file;
    std::vector<uint8_t>* out;
    uint64_t pos;  // next file offset wanted
    uint64_t end;
    const Grow* grow;
    Response response{};
    bool started = false;   // the answer's headers were checked
    bool body = false;      // the answer's body holds file bytes (200 / 206)
    uint64_t body_pos = 0;  // file offset of the body's next byte
    uint64_t body_end = kUnknown;
    bool stopped = false;  // the transfer was ended on purpose: enough bytes
    std::optional<Error> error{};

    uint64_t Stop() {
      if (*grow && out->size() >= 8) end = (*grow)(*out);
      return file->size_ ? std::min(end, *file->size_) : end;
    }
  };

  static size_t OnHeader(char* data, size_t size, size_t count, void* user) {
    auto& r = static_cast<Transfer*>(user)->response;
    std::string_view line = Trim(std::string_view(data, size * count));
    if (line.starts_with("HTTP/")) {
      r = Response{};
      size_t sp = line.find(' ');
      if (sp != std::string_view::npos) r.status = std::atol(std::string(line.substr(sp + 1, 3)).c_str());
    } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
      std::string name = Lower(line.substr(0, colon));
      std::string value(Trim(line.substr(colon + 1)));
      if (name == "content-range") r.content_range = value;
      else if (name == "content-length") r.content_length = value;
      else if (name == "content-encoding") r.content_encoding = value;
      else if (name == "etag") r.etag = value;
      else if (name == "retry-after") r.retry_after = value;
      else if (name == "x-error-message") r.error_message = value;
    }
    return size * count;
  }

  static size_t OnWrite(char* data, size_t size, size_t count, void* user) {
    auto& t = *static_cast<Transfer*>(user);
    size_t n = size * count;
    if (!t.started) t.file->Start(t);
    if (t.error) return 0;
    if (!t.body) return n;  // an error page: not file bytes
    if (t.body_pos + n > t.body_end) {
      t.error = Io("cannot read `" + t.file->label_ + "`: the server sent more bytes than its Content-Range");
      return 0;
    }
    size_t i = 0;
    if (t.body_pos < t.pos) {  // a 200 to a ranged request starts at byte 0: skip to pos
      size_t skip = static_cast<size_t>(std::min<uint64_t>(n, t.pos - t.body_pos));
      t.body_pos += skip;
      i += skip;
    }
    while (i < n) {
      uint64_t stop = t.Stop();
      if (t.body_pos >= stop) {
        t.stopped = true;  // enough: end the transfer (a server ignoring Range would send the whole file)
        return 0;
      }
      size_t take = static_cast<size_t>(std::min<uint64_t>(n - i, stop - t.body_pos));
      t.out->insert(t.out->end(), data + i, data + i + take);
      i += take;
      t.body_pos += take;
      t.pos += take;
    }
    return n;
  }

  // Checks the answer's headers once: a 200 / 206 body becomes the source of file bytes, its ETag and size are
  // held to the first answer's.
  void Start(Transfer& t) {
    t.started = true;
    const Response& r = t.response;
    if (r.status == 206) {
      std::string range = r.content_range.value_or("");
      std::optional<uint64_t> a, b, total;
      bool ok = false;
      if (range.starts_with("bytes ")) {
        std::string_view v = std::string_view(range).substr(6);
        size_t dash = v.find('-'), slash = v.find('/');
        if (dash != std::string_view::npos && slash != std::string_view::npos && dash < slash) {
          a = ParseU64(v.substr(0, dash));
          b = ParseU64(v.substr(dash + 1, slash - dash - 1));
          std::string_view tail = v.substr(slash + 1);
          total = tail == "*" ? std::optional<uint64_t>() : ParseU64(tail);
          ok = a && b && (tail == "*" || total);
        }
      }
      uint64_t stop = t.Stop();
      std::optional<uint64_t> length = r.content_length ? ParseU64(*r.content_length) : std::nullopt;
      if (!ok || *a != t.pos || *b >= stop || *b < t.pos || (r.content_length && (!length || *length != *b - t.pos + 1))) {
        t.error = Io("cannot read `" + label_ + "`: wrong Content-Range `" + range + "` in answer to bytes=" +
                     std::to_string(t.pos) + "-" + std::to_string(stop - 1));
        return;
      }
      if (Status s = Pin(r, total); !s.ok()) return void(t.error = s.error());
      t.body = true;
      t.body_pos = *a;
      t.body_end = *b + 1;
    } else if (r.status == 200) {
      // The whole file from byte 0 (the server ignored Range). Its length is the file's unless it is compressed.
      std::optional<uint64_t> size;
      if (r.content_length && (!r.content_encoding || *r.content_encoding == "identity"))
        size = ParseU64(*r.content_length);
      if (Status s = Pin(r, size); !s.ok()) return void(t.error = s.error());
      t.body = true;
      t.body_pos = 0;
      t.body_end = size.value_or(kUnknown);
    }
  }

  // Pins the first answer's ETag and size; a later answer with others means the file changed.
  Status Pin(const Response& r, std::optional<uint64_t> size) {
    std::optional<std::string> etag = r.etag;
    if (etag && etag->starts_with("W/")) etag->erase(0, 2);
    if (!answered_) {
      answered_ = true;
      etag_ = etag;
    } else if (etag && etag_ && *etag != *etag_) {
      return Io("`" + label_ + "` changed while being read (ETag " + *etag_ + " became " + *etag + ")");
    }
    if (!size) return Status::Ok();
    if (size_ && *size != *size_)
      return Io("`" + label_ + "` changed while being read (size " + std::to_string(*size_) + " became " +
                std::to_string(*size) + ")");
    size_ = size;
    return Status::Ok();
  }

  Outcome HttpError(const Response& r) {
    std::string message = "cannot " + std::string(answered_ ? "read" : "open") + " `" + label_ + "`: HTTP " +
                          std::to_string(r.status);
    if (r.error_message && !r.error_message->empty()) message += ": " + *r.error_message;
    if ((r.status == 401 || r.status == 403) && token_.empty()) message += " (no token was sent)";
    Outcome o{.error = Io(message)};
    if (r.status >= 500 || r.status == 429) {
      o.transient = true;
      if (r.retry_after) {
        std::string_view v = Trim(*r.retry_after);
        if (auto secs = ParseU64(v); secs && *secs <= 1'000'000) o.retry_after = static_cast<long>(*secs);
      }
    }
    return o;
  }

  // Sends one ranged GET for [t.pos, stop) and reads its body into t.out.
  Outcome Request(Transfer& t) {
    uint64_t stop = t.Stop();
    t.response = Response{};
    t.started = t.body = t.stopped = false;
    t.body_pos = 0;
    t.body_end = kUnknown;
    t.error.reset();
    std::string range = std::to_string(t.pos) + "-" + std::to_string(stop - 1);
    char errbuf[CURL_ERROR_SIZE] = {};
    curl_easy_reset(curl_);
    curl_easy_setopt(curl_, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl_, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);  // Authorization: curl sends it to the original host only
    curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl_, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl_, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl_, CURLOPT_USERAGENT, "peft-bridge/" PB_VERSION);
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a stalled transfer (under 1 B/s for a minute) is retried
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, &HttpFile::OnHeader);
    curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &HttpFile::OnWrite);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &t);
    CURLcode rc = curl_easy_perform(curl_);

    if (t.error) return {.error = t.error};
    if (rc == CURLE_WRITE_ERROR && t.stopped) rc = CURLE_OK;
    if (rc != CURLE_OK) {
      bool transient = rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_PARTIAL_FILE ||
                       rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
                       rc == CURLE_HTTP2 || rc == CURLE_HTTP2_STREAM || rc == CURLE_SSL_CONNECT_ERROR;
      std::string reason = errbuf[0] ? errbuf : curl_easy_strerror(rc);
      return {.error = Io("cannot read `" + label_ + "`: " + reason), .transient = transient};
    }
    if (!t.started) Start(t);  // an empty body: the headers were not checked yet
    if (t.error) return {.error = t.error};
    const Response& r = t.response;
    if (r.status == 416) {
      std::string range_header = r.content_range.value_or("");
      auto total = range_header.starts_with("bytes */") ? ParseU64(std::string_view(range_header).substr(8)) : std::nullopt;
      if (!total) return HttpError(r);
      if (Status s = Pin(r, total); !s.ok()) return {.error = s.error()};
      return {.eof = true};
    }
    if (!t.body) return HttpError(r);
    if (t.stopped) return {};
    if (t.body_end == kUnknown) {
      size_ = t.body_pos;  // a body of unknown length ended: so does the file
      return {.eof = true};
    }
    if (t.body_pos < t.body_end)
      return {.error = Io("cannot read `" + label_ + "`: the connection closed at byte " + std::to_string(t.body_pos) +
                          " of " + std::to_string(t.body_end)),
              .transient = true};
    return {};
  }

  std::string url_, label_, token_;
  CURL* curl_ = nullptr;
  curl_slist* headers_ = nullptr;
  std::optional<uint64_t> size_;
  std::optional<std::string> etag_;
  bool answered_ = false;
};

class IgnoreEvents final : public ReaderEvents {
 public:
  Status OnHeader(const Header&) override { return Status::Ok(); }
  Status OnTensorData(size_t, uint64_t, std::span<const uint8_t>) override { return Status::Ok(); }
};

}  // namespace

bool IsRemoteAddress(const std::string& arg) {
  return StartsWithNoCase(arg, "http://") || StartsWithNoCase(arg, "https://") || StartsWithNoCase(arg, "hf://");
}

Result<Header> ReadRemoteHeader(const std::string& arg) {
  const char* env_token = std::getenv("HF_TOKEN");
  std::string hf_token = env_token ? env_token : "";
  std::string url = arg;
  std::string token;
  if (StartsWithNoCase(arg, "hf://")) {
    auto resolved = HubUrlFor(arg);
    if (!resolved.ok()) return resolved.error();
    url = resolved.value();
    token = hf_token;
  } else if (Origin(arg) == Origin(Endpoint())) {
    token = hf_token;  // HF_TOKEN goes to the Hub only, never to another server
  }

  HttpFile file(url, arg, token);
  // The header ends at 8 + N, N being the first 8 bytes. A length the core will refuse (too large, or past the
  // end of the file) is not fetched: the core reports it from the prefix.
  auto header_end = [&file](std::span<const uint8_t> got) -> uint64_t {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | got[i];
    if (n > kMaxHeaderSize || (file.size() && 8 + n > *file.size())) return 8;
    return 8 + n;
  };
  std::vector<uint8_t> head;
  if (Status s = file.FetchRange(0, kFirstRange, head, header_end); !s.ok()) return s.error();

  // The core validates the bytes exactly as a local file of this size (or as a stream when the size is unknown).
  StreamingReader reader(ReaderOptions{.total_size = file.size()});
  IgnoreEvents events;
  size_t pos = 0;
  while (!reader.header_done() && pos < head.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(reader.bytes_until_header(), head.size() - pos));
    if (n == 0) break;
    if (Status s = reader.Feed(std::span<const uint8_t>(head.data() + pos, n), events); !s.ok()) return s.error();
    pos += n;
  }
  if (!reader.header_done()) {
    Status s = reader.Finish(events);
    if (!s.ok()) return s.error();
    return Io("cannot read `" + arg + "`: the header is incomplete");
  }
  return *reader.header();
}

}  // namespace pb::cli
