#include "app/push_target.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "text/size_text.h"
#include "core/utf8.h"

namespace pb::app {
namespace {

bool WordChar(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

bool HubNamePart(std::string_view part) {
  if (part.empty() || part.size() > 96) return false;
  if (!WordChar(part.front()) || !WordChar(part.back())) return false;
  for (char c : part)
    if (!WordChar(c) && c != '-' && c != '.') return false;
  return part.find("--") == std::string_view::npos && part.find("..") == std::string_view::npos;
}

}  // namespace

std::optional<std::string> RepoIdProblem(std::string_view repo) {
  const std::string shown = "`" + ClipForMessage(repo) + "`";
  size_t slash = repo.find('/');
  if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos)
    return shown + " is not a repo id: expected OWNER/NAME";
  std::string_view owner = repo.substr(0, slash), name = repo.substr(slash + 1);
  for (std::string_view part : {owner, name})
    if (!HubNamePart(part))
      return shown + " is not a repo id: OWNER and NAME are 1-96 letters, digits, '-', '_' or '.', starting and ending "
                     "with a letter, digit or '_', without '--' or '..'";
  if (name.size() >= 4 && name.substr(name.size() - 4) == ".git")
    return shown + " is not a repo id: NAME may not end in .git";
  return std::nullopt;
}

std::optional<std::string> BranchProblem(std::string_view branch) {
  const std::string shown = "`" + ClipForMessage(branch) + "`";
  if (branch.empty()) return std::string("the branch after '@' is empty");
  if (branch.size() > 255) return shown + " is not a branch name: longer than 255 bytes";
  for (unsigned char c : branch)
    if (c <= 0x20 || c == 0x7f || c == '~' || c == '^' || c == ':' || c == '?' || c == '*' || c == '[' || c == '\\')
      return shown + " is not a branch name: no spaces, control characters or any of ~^:?*[\\";
  if (branch.front() == '/' || branch.back() == '/' || branch.front() == '.' || branch.back() == '.' ||
      branch.find("//") != std::string_view::npos || branch.find("..") != std::string_view::npos ||
      branch.find("@{") != std::string_view::npos || branch.find("/.") != std::string_view::npos ||
      (branch.size() >= 5 && branch.substr(branch.size() - 5) == ".lock"))
    return shown +
           " is not a branch name (git's rules: no '..', '//', '@{', leading or trailing '/' or '.', '.lock' end)";
  return std::nullopt;
}

std::variant<PushTarget, std::string> ParsePushTarget(std::string_view value, std::string_view option) {
  const std::string prefix = std::string(option) + " `" + ClipForMessage(value) + "`: ";
  if (value.starts_with("hf://") || value.starts_with("https://") || value.starts_with("http://"))
    return prefix + "expected OWNER/REPO[@BRANCH], a repo id, not a URL (the endpoint is HF_ENDPOINT's)";
  size_t at = value.find('@');
  PushTarget target{std::string(value.substr(0, at)),
                    at == std::string_view::npos ? "main" : std::string(value.substr(at + 1))};
  if (auto problem = RepoIdProblem(target.repo)) return prefix + *problem + " (expected OWNER/REPO[@BRANCH])";
  if (auto problem = BranchProblem(target.branch)) return prefix + *problem;
  return target;
}

CreateRepoAnswer ClassifyCreateRepoAnswer(int status) {
  if (status >= 200 && status < 300) return CreateRepoAnswer::kCreated;
  if (status == 409) return CreateRepoAnswer::kExists;
  if (status == 401 || status == 402 || status == 403) return CreateRepoAnswer::kAskWhetherItExists;
  return CreateRepoAnswer::kFailed;
}

namespace {

// The entry itself (not what it is in): .git, .cache/huggingface, our temporaries.
bool SkippedItself(std::string_view path) {
  std::string_view last = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  if (last == ".git" || IsOwnTemporary(last)) return true;
  return path == ".cache/huggingface" || path.ends_with("/.cache/huggingface");
}

}  // namespace

bool PushSkips(std::string_view path) {
  for (size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1))
    if (SkippedItself(path.substr(0, slash))) return true;  // inside a skipped folder
  return SkippedItself(path);
}

Result<std::vector<std::string>> PushFolderFiles(std::string_view dir, std::vector<FolderEntry> entries) {
  const std::string shown(dir);
  std::vector<std::string> files;
  for (const auto& e : entries) {
    if (PushSkips(e.path)) continue;
    if (e.path == kCommitJournalName)
      return MakeError(
          ErrorCode::InvalidArgument,
          "`" + shown + "` holds the journal of an interrupted peft-bridge run (" + std::string(kCommitJournalName) +
              "): its output is not complete; run the command into it again, which completes or undoes that run");
    if (e.kind == EntryKind::kDirectory) continue;  // its files are listed under it
    if (e.kind != EntryKind::kFile)
      return MakeError(ErrorCode::InvalidArgument,
                       "`" + shown + "/" + e.path + "` is neither a file nor a folder: nothing to push for it");
    files.push_back(e.path);
  }
  if (files.empty()) return MakeError(ErrorCode::InvalidArgument, "`" + shown + "` holds no file to push");
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

// `s` as a shell word: as it is when it is plain, else in single quotes.
std::string ShellWord(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '-' || c == '.' || c == '/' || c == '@' || c == ':' || c == '=' || c == '+' || c == ',');
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string PushRetryHint(const CommandLine& line, const PushTarget& target) {
  std::optional<std::string> out = line.command == "translate" && line.positional.size() > 1 ? line.positional[1]
                                                                                             : line.Value("out");
  if (!out) return "";
  std::string retry = "peft-bridge push " + ShellWord(*out) + " --to " + target.repo +
                      (target.branch == "main" ? "" : "@" + ShellWord(target.branch));
  if (line.Has("create-pr")) retry += " --create-pr";
  if (line.Has("private")) retry += " --private";
  return "; the output is complete in `" + ClipForMessage(*out) + "`: push it with `" + retry + "`";
}

std::string PushTargetJson(std::string_view value) {
  nlohmann::json j;
  auto parsed = ParsePushTarget(value);
  if (auto* error = std::get_if<std::string>(&parsed)) {
    j["error"] = *error;
  } else {
    const auto& t = std::get<PushTarget>(parsed);
    j["repo"] = t.repo;
    j["branch"] = t.branch;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string PushCommitTitle(std::string_view command, size_t files) {
  return "peft-bridge " + std::string(command) + ": " + std::to_string(files) + (files == 1 ? " file" : " files");
}

std::string RenderPushOutcome(const PushOutcome& o) {
  uint64_t bytes = 0;
  size_t lfs = 0;
  for (const auto& f : o.files) {
    bytes += f.size;
    lfs += f.lfs ? 1 : 0;
  }
  std::string what = std::to_string(o.files.size()) + (o.files.size() == 1 ? " file" : " files");
  if (lfs) what += " (" + std::to_string(lfs) + " through LFS)";
  what += ", " + text::SizeText(bytes);
  std::string short_commit = o.commit.substr(0, 12);
  if (o.create_pr)
    return "opened a pull request on " + o.target.repo + " (against " + o.target.branch + ") with " + what +
           ": commit " + short_commit + "\n  " + o.pull_request_url + "\n";
  return "pushed " + what + " to " + o.target.repo + "@" + o.target.branch + ": commit " + short_commit + "\n  " +
         o.commit_url + "\n";
}

std::string RenderPushOutcomeJson(std::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  PushOutcome o;
  if (!j.is_object()) return RenderPushOutcome(o);
  auto str = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  o.target.repo = str("repo");
  o.target.branch = str("branch");
  o.create_pr = j.contains("createPr") && j["createPr"].is_boolean() && j["createPr"].get<bool>();
  o.commit = str("commit");
  o.commit_url = str("url");
  o.pull_request_url = str("pullRequestUrl");
  if (j.contains("files") && j["files"].is_array())
    for (const auto& f : j["files"]) {
      if (!f.is_object()) continue;
      PushedFile p;
      if (f.contains("path") && f["path"].is_string()) p.path = f["path"].get<std::string>();
      if (f.contains("size") && f["size"].is_number_unsigned()) p.size = f["size"].get<uint64_t>();
      if (f.contains("lfs") && f["lfs"].is_boolean()) p.lfs = f["lfs"].get<bool>();
      o.files.push_back(std::move(p));
    }
  return RenderPushOutcome(o);
}

}  // namespace pb::app
