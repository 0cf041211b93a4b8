// `--push-to OWNER/REPO[@BRANCH]` (merge, translate, combine, extract, create): the grammar, its messages and the
// summary printed after a push, written once for both CLIs. Both write the outputs as without the option, then
// push the files they wrote: the npm CLI with pushToHub (web/src/remote/push.js, over @huggingface/hub), the native CLI
// with the same requests (src/cli/push_command.cc, over net/hub_commit.h). Sans-I/O, like the rest of app/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "app/command_line.h"
#include "app/output_policy.h"
#include "core/result.h"

namespace pb::app {

struct PushTarget {
  std::string repo;    // owner/name
  std::string branch;  // "main" when not given
};

// Why `repo` is not a Hub repo id `owner/name` (huggingface_hub's validate_repo_id rules: each part 1-96 of
// letters, digits, '-', '_', '.', starting and ending with a letter, digit or '_', no '--' or '..', the name not
// ending in .git), or nullopt. The message names `repo` as given.
std::optional<std::string> RepoIdProblem(std::string_view repo);

// Why `branch` is no branch name git and the Hub take, or nullopt.
std::optional<std::string> BranchProblem(std::string_view branch);

// `OWNER/REPO[@BRANCH]` (the branch after the first '@'), or the usage message for the value of `option`.
std::variant<PushTarget, std::string> ParsePushTarget(std::string_view value, std::string_view option = "--push-to");

// What a push does with the answer to its repo creation (POST /api/repos/create), as huggingface_hub's `hf upload`
// (create_repo with exist_ok=True): 200 created; 409 it exists; 401, 402 or 403 (no right to create in that
// namespace, a token without that scope) may still mean it exists: ask (GET /api/models/OWNER/REPO) and go on
// if it answers 200, else fail with the creation's answer; anything else fails.
enum class CreateRepoAnswer { kCreated, kExists, kAskWhetherItExists, kFailed };
CreateRepoAnswer ClassifyCreateRepoAnswer(int status);

// `push DIR`: the files of a folder, as huggingface_hub's upload_folder takes them: every file under it, by its
// path relative to DIR ('/'-separated), in byte order; not .git/ nor .cache/huggingface/ (its default ignore
// patterns), nor our own temporaries (IsOwnTemporary). The edges walk DIR (not into a folder PushSkips names)
// and list what they found, links followed (a dangling one: kOther).
struct FolderEntry {
  std::string path;  // relative to DIR
  EntryKind kind = EntryKind::kFile;
};
// True for what a push leaves out: .git, .cache/huggingface, our temporaries, and anything inside those folders.
bool PushSkips(std::string_view relative_path);
// InvalidArgument naming the file for a DIR holding an interrupted run's journal (its output is not complete),
// an entry that is neither a file nor a folder, or no file at all.
Result<std::vector<std::string>> PushFolderFiles(std::string_view dir, std::vector<FolderEntry> entries);

// Appended to a failed --push-to's error: the output is complete where the command wrote it, and how to push it
// again: "; the output is complete in `out`: push it with `peft-bridge push out --to me/m@dev`".
std::string PushRetryHint(const CommandLine& line, const PushTarget& target);

// {"repo","branch"} or {"error": message}: ParsePushTarget for the npm CLI.
std::string PushTargetJson(std::string_view value);

// The commit title when --commit-message is not given: "peft-bridge merge: 3 files".
std::string PushCommitTitle(std::string_view command, size_t files);

struct PushedFile {
  std::string path;
  uint64_t size = 0;
  bool lfs = false;
};

struct PushOutcome {
  PushTarget target;
  bool create_pr = false;
  std::string commit;
  std::string commit_url;
  std::string pull_request_url;
  std::vector<PushedFile> files;
};

// What the CLIs print on stderr after a push (not with --quiet):
//   pushed 3 files (2 through LFS), 1.20 GB to me/model@main: commit 0123456789ab
//     http://…/commit/…
// or "opened a pull request on me/model (against main) with …: http://…/discussions/1".
std::string RenderPushOutcome(const PushOutcome& outcome);

// RenderPushOutcome of {repo, branch, createPr, commit, url, pullRequestUrl, files: [{path, size, lfs}]} (the JS
// PushResult plus the target), for the npm CLI. Malformed input renders what it can.
std::string RenderPushOutcomeJson(std::string_view json);

// The message when no token is found (both CLIs; exit 1).
inline constexpr std::string_view kPushNeedsToken =
    "--push-to needs a token with write access: set HF_TOKEN, or log in with `hf auth login` (huggingface_hub's "
    "token file)";

}  // namespace pb::app
