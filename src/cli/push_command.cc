// --push-to for the native CLI (docs/push.md): the files the command's transaction committed are pushed to a Hub
// model repo in one commit, with the requests @huggingface/hub's commit makes (the npm CLI's path): optional repo
// and branch creation, preupload, a sha256 pass over each LFS file, the LFS batch call, basic or multipart PUTs
// read from the file (never held), the NDJSON commit. The bodies, answers and URLs are net/hub_commit.h's;
// this file is the libcurl transport and the file reads; every call but the commit (the only one that changes the
// repo, never retried) is retried as net/http_retry.h decides.
#include <curl/curl.h>
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/push_target.h"
#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/http_source.h"
#include "cli/output_transaction.h"
#include "cli/text_output.h"
#include "net/http_policy.h"
#include "net/hub_commit.h"
#include "net/sha256.h"

namespace pb::cli {
namespace {

constexpr size_t kPiece = 4 << 20;
constexpr size_t kMaxAnswer = 64 << 20;

struct Answer {
  long status = 0;
  std::string body;
  std::string etag;
  std::string error_message;  // X-Error-Message
  std::string retry_after, date;
  std::string give_up_reason;           // why a retried status was not retried again (net::RetryDecision::reason)
  net::HttpCallClock* clock = nullptr;  // told when the head arrives
  bool head_seen = false;
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The call's deadlines (net::HttpCallClock) as libcurl's progress callback: bytes moved either way are progress,
// and a passed deadline aborts the transfer with the clock's error.
struct Progress {
  net::HttpCallClock* clock = nullptr;
  curl_off_t sent = 0, received = 0;
  std::optional<Error> expired;
  bool total = false;
};

int OnProgress(void* user, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t ulnow) {
  auto* p = static_cast<Progress*>(user);
  const int64_t now = NowMs();
  const curl_off_t moved = (dlnow - p->received) + (ulnow - p->sent);
  p->received = dlnow;
  p->sent = ulnow;
  if (moved > 0) p->clock->OnProgress(now, static_cast<uint64_t>(moved));
  if (now < p->clock->deadline_ms()) return 0;
  p->expired = p->clock->Expired(now, &p->total);
  return p->expired ? 1 : 0;
}

struct FileRange {
  FILE* file = nullptr;
  uint64_t left = 0;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* a = static_cast<Answer*>(user);
  std::string line(data, size * count);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = Lower(line.substr(0, colon));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
    if (name == "etag") a->etag = value;
    if (name == "x-error-message") a->error_message = value;
    if (name == "retry-after") a->retry_after = value;
    if (name == "date") a->date = value;
  }
  if (!a->head_seen && a->clock && line.starts_with("HTTP/")) {
    a->head_seen = true;
    a->clock->OnHead(NowMs());
  }
  return size * count;
}

size_t OnWrite(char* data, size_t size, size_t count, void* user) {
  auto* a = static_cast<Answer*>(user);
  if (a->body.size() + size * count > kMaxAnswer) return 0;
  a->body.append(data, size * count);
  return size * count;
}

size_t OnRead(char* buffer, size_t size, size_t count, void* user) {
  auto* r = static_cast<FileRange*>(user);
  size_t want = std::min<uint64_t>(size * count, r->left);
  if (want == 0) return 0;
  size_t got = std::fread(buffer, 1, want, r->file);
  if (got == 0) return CURL_READFUNC_ABORT;
  r->left -= got;
  return got;
}

struct Body {
  const std::string* text = nullptr;  // or
  std::string path;                   // a file range
  uint64_t offset = 0;
  uint64_t length = 0;
};

// One attempt of a call, held to `clock`'s deadlines. A transport failure is an IoError (the clock's error when it
// was a deadline, `*total` set when the call's own) and `*kind` says which; any HTTP status is an Answer.
Result<Answer> Send(const std::string& method, const std::string& url, const std::vector<std::string>& header_lines,
                    const Body& body, net::HttpCallClock& clock, bool* total, net::TransportError* kind) {
  static const bool initialized = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  (void)initialized;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  if (!easy) return MakeError(ErrorCode::IoError, "cannot start an HTTP request");
  curl_slist* headers = nullptr;
  for (const auto& h : header_lines) headers = curl_slist_append(headers, h.c_str());
  headers = curl_slist_append(headers, "Expect:");
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers, &curl_slist_free_all);
  Answer answer;
  answer.clock = &clock;
  Progress progress{&clock};
  CURL* e = easy.get();
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_USERAGENT, "peft-bridge/" PB_VERSION);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  // the deadlines of every request (PB_HTTP_IDLE_MS, PB_HTTP_MIN_RATE, PB_HTTP_TOTAL_MS): net::HttpCallClock
  curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, &OnProgress);
  curl_easy_setopt(e, CURLOPT_XFERINFODATA, &progress);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &answer);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnWrite);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &answer);
  std::unique_ptr<FILE, decltype(&std::fclose)> file(nullptr, &std::fclose);
  FileRange range;
  if (body.text) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.text->data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.text->size()));
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
  } else if (!body.path.empty()) {
    file.reset(std::fopen(body.path.c_str(), "rb"));
    if (!file || ::fseeko(file.get(), static_cast<off_t>(body.offset), SEEK_SET) != 0)
      return MakeError(ErrorCode::IoError, "cannot read `" + body.path + "`");
    range = {file.get(), body.length};
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, &OnRead);
    curl_easy_setopt(e, CURLOPT_READDATA, &range);
    curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.length));
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
  } else {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  clock.BeginAttempt(NowMs());
  CURLcode code = curl_easy_perform(e);
  *total = progress.total;
  if (code == CURLE_ABORTED_BY_CALLBACK && progress.expired) return *progress.expired;
  if (code != CURLE_OK) {
    *kind = CurlTransportError(code);
    return MakeError(ErrorCode::IoError, std::string(curl_easy_strerror(code)));
  }
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &answer.status);
  return answer;
}

// Send, retried as the one retry decision says (net/http_retry.h: transport failures, a passed deadline included,
// and 408, 429, 500, 502, 503, 504; PB_HTTP_RETRIES times, the backoff or the server's Retry-After), unless `retry`
// is false; every attempt and wait within PB_HTTP_TOTAL_MS (net::HttpCallClock).
Result<Answer> Call(const std::string& method, const std::string& url, const std::vector<std::string>& headers,
                    const Body& body, bool retry) {
  PB_ASSIGN_OR_RETURN(const net::HttpLimits limits, LimitsFromEnv());
  net::HttpCallClock clock(limits, method + " " + url, NowMs());
  for (uint32_t failures = 0;; ++failures) {
    bool total = false;
    net::TransportError kind = net::TransportError::kBroken;
    auto r = Send(method, url, headers, body, clock, &total, &kind);
    if (r.ok() && !net::IsRetriedStatus(static_cast<int>(r->status))) return r;  // a success, or a final status
    if (!retry) return r;
    net::AttemptFailure what{.transport = kind};
    if (r.ok()) {
      what.status = static_cast<int>(r->status);
      if (!r->retry_after.empty()) what.retry_after = r->retry_after;
      if (!r->date.empty()) what.date = r->date;
    }
    const net::RetryDecision decision = clock.DecideRetry(NowMs(), what, failures);
    if (!decision.retry()) {
      if (decision.reason.empty()) return r;
      if (r.ok()) {
        r->give_up_reason = decision.reason;
        return r;
      }
      return MakeError(r.error().code, r.error().message + " (" + decision.reason + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(decision.wait_ms));
  }
}

Error HubFailure(const std::string& what, const Answer& a) {
  std::string text = net::HubErrorText(static_cast<int>(a.status), a.body, a.error_message);
  if (!a.give_up_reason.empty()) text += " (" + a.give_up_reason + ")";
  return MakeError(ErrorCode::IoError, what + ": " + text);
}

Result<std::string> ReadPrefix(const std::string& path, uint64_t n) {
  std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return MakeError(ErrorCode::IoError, "cannot read `" + path + "`");
  std::string out(n, '\0');
  size_t got = std::fread(out.data(), 1, n, f.get());
  out.resize(got);
  return out;
}

Result<std::string> HashFile(const std::string& path) {
  std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return MakeError(ErrorCode::IoError, "cannot read `" + path + "`");
  net::Sha256 sha;
  std::vector<uint8_t> piece(kPiece);
  for (;;) {
    size_t got = std::fread(piece.data(), 1, piece.size(), f.get());
    if (got == 0) break;
    sha.Update({piece.data(), got});
  }
  if (std::ferror(f.get())) return MakeError(ErrorCode::IoError, "cannot read `" + path + "`");
  return sha.HexDigest();
}

struct PushFile {
  std::string name;
  std::string path;
  uint64_t size = 0;
  bool lfs = false;
  std::string oid;
};

// Pushes `files` ({name in the repo, local path}) to `target`, creating the repo when it is missing, as `hf upload`.
Result<app::PushOutcome> Push(const app::CommandLine& line, const app::PushTarget& target, const std::string& token,
                              const std::vector<CommittedOutput>& outputs) {
  const bool create_pr = line.Has("create-pr");
  const std::string endpoint = HubEndpoint();
  const auto urls = net::MakeHubCommitUrls(endpoint, target.repo, target.branch, create_pr);
  const std::string auth = "Authorization: Bearer " + token;
  const std::string json = "Content-Type: application/json";
  const std::string pushing = "pushing to " + target.repo;

  std::vector<PushFile> files;
  for (const auto& c : outputs) {
    struct stat st;
    if (::stat(c.path.c_str(), &st) != 0) return MakeError(ErrorCode::IoError, "cannot read `" + c.path + "`");
    files.push_back({c.name, c.path, static_cast<uint64_t>(st.st_size)});
  }
  if (files.empty()) return MakeError(ErrorCode::IoError, "nothing was written to push");

  {  // the repo, created when missing (app::ClassifyCreateRepoAnswer: huggingface_hub's create_repo(exist_ok=True))
    size_t slash = target.repo.find('/');
    nlohmann::json request = {
        {"name", target.repo.substr(slash + 1)}, {"organization", target.repo.substr(0, slash)}, {"type", "model"}};
    if (line.Has("private")) request["visibility"] = "private";
    std::string text = request.dump();
    PB_ASSIGN_OR_RETURN(auto a, Call("POST", urls.create_repo, {auth, json}, {.text = &text}, true));
    switch (app::ClassifyCreateRepoAnswer(static_cast<int>(a.status))) {
      case app::CreateRepoAnswer::kCreated:
      case app::CreateRepoAnswer::kExists: break;
      case app::CreateRepoAnswer::kAskWhetherItExists: {
        PB_ASSIGN_OR_RETURN(auto info, Call("GET", urls.repo_info, {auth}, {}, true));
        if (info.status != 200) return HubFailure("creating " + target.repo, a);
        break;
      }
      case app::CreateRepoAnswer::kFailed: return HubFailure("creating " + target.repo, a);
    }
  }
  if (target.branch != "main" && !target.branch.starts_with("refs/")) {
    std::string text = "{}";
    PB_ASSIGN_OR_RETURN(auto a, Call("POST", urls.branch, {auth, json}, {.text = &text}, true));
    if (a.status != 200 && a.status != 409)
      return HubFailure("creating branch " + target.branch + " of " + target.repo, a);
  }

  // preupload: which files go through LFS
  std::vector<net::PreuploadFile> samples;
  for (const auto& f : files) {
    PB_ASSIGN_OR_RETURN(auto sample, ReadPrefix(f.path, 512));
    samples.push_back({f.name, f.size, std::move(sample)});
  }
  std::string preupload = net::PreuploadRequestJson(samples);
  PB_ASSIGN_OR_RETURN(auto pre, Call("POST", urls.preupload, {auth, json}, {.text = &preupload}, true));
  if (pre.status != 200) return HubFailure(pushing, pre);
  PB_ASSIGN_OR_RETURN(auto lfs_paths, net::ParsePreuploadLfsPaths(pre.body));

  // the first pass: each LFS file's sha256
  std::vector<net::LfsObject> objects;
  std::vector<PushFile*> lfs_files;
  for (auto& f : files) {
    if (std::find(lfs_paths.begin(), lfs_paths.end(), f.name) == lfs_paths.end()) continue;
    f.lfs = true;
    PB_ASSIGN_OR_RETURN(f.oid, HashFile(f.path));
    objects.push_back({f.oid, f.size});
    lfs_files.push_back(&f);
  }

  // the second pass: the uploads the LFS batch asks for
  if (!objects.empty()) {
    std::string batch =
        net::LfsBatchRequestJson(objects, create_pr ? std::nullopt : std::optional<std::string_view>(target.branch));
    const std::vector<std::string> lfs_headers = {auth, "Accept: application/vnd.git-lfs+json",
                                                  "Content-Type: application/vnd.git-lfs+json"};
    PB_ASSIGN_OR_RETURN(auto b, Call("POST", urls.lfs_batch, lfs_headers, {.text = &batch}, true));
    if (b.status != 200) return HubFailure(pushing, b);
    PB_ASSIGN_OR_RETURN(auto uploads, net::ParseLfsBatch(b.body));
    for (const auto& u : uploads) {
      if (!u.needed) continue;
      const PushFile* f = nullptr;
      for (const auto* candidate : lfs_files)
        if (candidate->oid == u.oid) f = candidate;
      if (!f) return MakeError(ErrorCode::IoError, pushing + ": the Hub answered for an object not asked for");
      const std::string uploading = pushing + ": uploading " + f->name;
      if (u.chunk_size == 0) {
        PB_ASSIGN_OR_RETURN(auto put, Call("PUT", u.href, {}, {.path = f->path, .offset = 0, .length = f->size}, true));
        if (put.status < 200 || put.status >= 300) return HubFailure(uploading, put);
        continue;
      }
      uint64_t parts = (f->size + u.chunk_size - 1) / u.chunk_size;
      if (u.part_urls.size() != parts)
        return MakeError(ErrorCode::IoError, uploading + ": the Hub asked for a wrong number of parts");
      std::vector<std::string> etags;
      for (uint64_t i = 0; i < parts; ++i) {
        uint64_t offset = i * u.chunk_size, length = std::min(u.chunk_size, f->size - offset);
        PB_ASSIGN_OR_RETURN(
            auto put, Call("PUT", u.part_urls[i], {}, {.path = f->path, .offset = offset, .length = length}, true));
        if (put.status < 200 || put.status >= 300)
          return HubFailure(uploading + " (part " + std::to_string(i + 1) + ")", put);
        if (put.etag.empty())
          return MakeError(ErrorCode::IoError,
                           uploading + ": the storage gave no ETag for part " + std::to_string(i + 1));
        etags.push_back(put.etag);
      }
      std::string completion = net::MultipartCompletionJson(u.oid, etags);
      PB_ASSIGN_OR_RETURN(
          auto done,
          Call("POST", u.href, {"Accept: application/vnd.git-lfs+json", "Content-Type: application/vnd.git-lfs+json"},
               {.text = &completion}, true));
      if (done.status < 200 || done.status >= 300) return HubFailure(uploading, done);
    }
  }

  // the commit: the only call that changes the repo, never retried
  std::vector<net::CommitEntry> entries;
  for (const auto& f : files) {
    net::CommitEntry e{f.name, f.lfs, f.oid, f.size, {}};
    if (!f.lfs) {
      PB_ASSIGN_OR_RETURN(e.content, ReadPrefix(f.path, f.size));
    }
    entries.push_back(std::move(e));
  }
  auto title = line.Value("commit-message");
  std::string commit =
      net::CommitNdjson(title ? *title : app::PushCommitTitle(line.command, files.size()), "", entries);
  PB_ASSIGN_OR_RETURN(
      auto c, Call("POST", urls.commit, {auth, "Content-Type: application/x-ndjson"}, {.text = &commit}, false));
  if (c.status != 200) return HubFailure(pushing, c);
  PB_ASSIGN_OR_RETURN(auto answer, net::ParseCommitAnswer(c.body));
  app::PushOutcome outcome{target, create_pr, answer.commit_oid, answer.commit_url, answer.pull_request_url, {}};
  for (const auto& f : files) outcome.files.push_back({f.name, f.size, f.lfs});
  return outcome;
}

// The push of `files` to the target in `value` (--push-to's or --to's), its summary on `summary_to`; a failed
// --push-to says how to push the written output again (app::PushRetryHint).
int PushFiles(const app::CommandLine& line, const std::string& value, const std::vector<CommittedOutput>& files,
              FILE* summary_to, bool with_retry_hint) {
  auto parsed = app::ParsePushTarget(value);
  if (auto* problem = std::get_if<std::string>(&parsed))
    return ReportFailure(MakeError(ErrorCode::InvalidArgument, *problem), false);
  const auto& target = std::get<app::PushTarget>(parsed);
  const std::string hint = with_retry_hint ? app::PushRetryHint(line, target) : "";
  auto failed = [&](Error e) {
    e.message += hint;
    return ReportFailure(e, false);  // on stderr: stdout holds the command's summary
  };
  std::string token = HubToken();
  if (token.empty()) return failed(MakeError(ErrorCode::InvalidArgument, std::string(app::kPushNeedsToken)));
  auto outcome = Push(line, target, token, files);
  if (!outcome.ok()) return failed(outcome.error());
  if (!line.Has("quiet")) {
    std::string text = app::RenderPushOutcome(outcome.value());
    WriteText(summary_to, text);
  }
  return 0;
}

// Every entry under `dir` (relative paths), links followed, not descending into what app::PushSkips names.
void ListFolder(const std::string& dir, const std::string& prefix, std::vector<app::FolderEntry>& entries) {
  DIR* d = ::opendir((prefix.empty() ? dir : dir + "/" + prefix).c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = prefix.empty() ? name : prefix + "/" + name;
    struct stat st;
    app::EntryKind kind = app::EntryKind::kOther;
    if (::stat((dir + "/" + path).c_str(), &st) == 0)
      kind = S_ISREG(st.st_mode)   ? app::EntryKind::kFile
             : S_ISDIR(st.st_mode) ? app::EntryKind::kDirectory
                                   : app::EntryKind::kOther;
    entries.push_back({path, kind});
    struct stat own;  // into real folders only: a link to a folder could lead back up
    if (kind == app::EntryKind::kDirectory && !app::PushSkips(path) && ::lstat((dir + "/" + path).c_str(), &own) == 0 &&
        S_ISDIR(own.st_mode))
      ListFolder(dir, path, entries);
  }
  ::closedir(d);
}

}  // namespace

int RunPush(const app::CommandLine& line) {
  return PushFiles(line, *line.Value("push-to"), CommittedOutputs(), stderr, true);
}

int RunPushCommand(const app::CommandLine& line) {
  const std::string& dir = line.positional[0];
  std::vector<CommittedOutput> files;
  if (IsDirectory(dir)) {
    std::vector<app::FolderEntry> entries;
    ListFolder(dir, "", entries);
    auto names = app::PushFolderFiles(dir, std::move(entries));
    if (!names.ok()) return ReportFailure(names.error(), false);
    for (const auto& name : names.value()) files.push_back({name, dir + "/" + name});
  } else if (IsRegularFile(dir)) {
    files.push_back({dir.substr(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/') + 1), dir});
  } else {
    struct stat st;
    const bool exists = ::lstat(dir.c_str(), &st) == 0;
    return ReportFailure(MakeError(exists ? ErrorCode::InvalidArgument : ErrorCode::IoError,
                                   exists ? "`" + dir + "` is neither a folder nor a file"
                                          : "cannot open `" + dir + "`: No such file or directory"),
                         false);
  }
  return PushFiles(line, *line.Value("to"), files, stdout, false);
}

}  // namespace pb::cli
