// --push-to OWNER/REPO[@BRANCH] (src/app/push_target.h): the grammar both CLIs share, its messages, the commands
// that take it, and the summary printed after a push.
#include "app/push_target.h"

#include <gtest/gtest.h>

#include "app/cli_text.h"
#include "app/command_line.h"

namespace pb::app {
namespace {

std::string Usage(std::vector<std::string> args) {
  auto r = ParseCommandLine(args);
  if (!std::holds_alternative<UsageError>(r)) {
    ADD_FAILURE() << "parsed";
    return {};
  }
  return std::get<UsageError>(r).message;
}

CommandLine Ok(std::vector<std::string> args) {
  auto r = ParseCommandLine(args);
  if (auto* e = std::get_if<UsageError>(&r)) ADD_FAILURE() << e->message;
  return std::holds_alternative<CommandLine>(r) ? std::get<CommandLine>(r) : CommandLine{};
}

TEST(PushTarget, RepoAndBranch) {
  auto a = std::get<PushTarget>(ParsePushTarget("me/llama-merged"));
  EXPECT_EQ(a.repo, "me/llama-merged");
  EXPECT_EQ(a.branch, "main");
  auto b = std::get<PushTarget>(ParsePushTarget("Org_1/model.v2@dev/exp-1"));
  EXPECT_EQ(b.repo, "Org_1/model.v2");
  EXPECT_EQ(b.branch, "dev/exp-1");
  EXPECT_EQ(std::get<PushTarget>(ParsePushTarget("me/m@refs/pr/3")).branch, "refs/pr/3");
  EXPECT_EQ(PushTargetJson("me/m@dev"), R"({"branch":"dev","repo":"me/m"})");
}

TEST(PushTarget, BadRepoIdsAndBranches) {
  for (const char* bad :
       {"me", "me/m/x", "/m", "me/", "-me/m", "me/m-", "me/a..b", "me/a--b", "me/bad name", "me/m.git", "me/é", ""}) {
    auto r = ParsePushTarget(bad);
    ASSERT_TRUE(std::holds_alternative<std::string>(r)) << bad;
    EXPECT_NE(std::get<std::string>(r).find("is not a repo id"), std::string::npos) << std::get<std::string>(r);
  }
  EXPECT_EQ(std::get<std::string>(ParsePushTarget("me/m@")), "--push-to `me/m@`: the branch after '@' is empty");
  for (const char* bad : {"me/m@a b", "me/m@a..b", "me/m@/x", "me/m@x/", "me/m@x.lock", "me/m@a:b", "me/m@a@{1}"})
    EXPECT_NE(std::get<std::string>(ParsePushTarget(bad)).find("is not a branch name"), std::string::npos) << bad;
  EXPECT_EQ(
      std::get<std::string>(ParsePushTarget("hf://me/m")),
      "--push-to `hf://me/m`: expected OWNER/REPO[@BRANCH], a repo id, not a URL (the endpoint is HF_ENDPOINT's)");
  EXPECT_EQ(std::get<std::string>(ParsePushTarget("me")),
            "--push-to `me`: `me` is not a repo id: expected OWNER/NAME (expected OWNER/REPO[@BRANCH])");
  EXPECT_FALSE(RepoIdProblem(std::string(96, 'a') + "/" + std::string(96, 'b')));
  EXPECT_TRUE(RepoIdProblem("me/" + std::string(97, 'b')));
}

TEST(PushTarget, TheFiveCommandsTakeIt) {
  auto m = Ok({"merge", "--base", "b", "--adapter", "a", "-o", "out", "--push-to", "me/m@dev", "--create-pr",
               "--commit-message", "merged", "--create-repo", "--private"});
  EXPECT_EQ(m.Value("push-to"), "me/m@dev");
  EXPECT_TRUE(m.Has("create-pr") && m.Has("create-repo") && m.Has("private"));
  EXPECT_EQ(m.Value("commit-message"), "merged");
  Ok({"translate", "in", "out", "--to", "mlx", "--push-to=me/m"});
  Ok({"combine", "a", "b", "-o", "out", "--push-to", "me/m"});
  Ok({"extract", "--base", "b", "--tuned", "t", "-o", "out", "--push-to", "me/m"});
  Ok({"create", "--base", "b", "-o", "out", "--target-modules", "q_proj", "--push-to", "me/m"});
  EXPECT_EQ(Usage({"unmerge", "--base", "b", "--adapter", "a", "-o", "out", "--push-to", "me/m"}),
            "unknown option `--push-to`");
  EXPECT_EQ(Usage({"convert", "a", "b", "--dtype", "bf16", "--push-to", "me/m"}), "unknown option `--push-to`");
  EXPECT_EQ(Usage({"inspect", "x", "--push-to", "me/m"}), "unknown option `--push-to`");
}

TEST(PushTarget, UsageErrors) {
  const std::vector<std::string> merge = {"merge", "--base", "b", "--adapter", "a", "-o", "out"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = merge;
    args.insert(args.end(), extra.begin(), extra.end());
    return Usage(args);
  };
  EXPECT_EQ(with({"--push-to", "me bad"}),
            "--push-to `me bad`: `me bad` is not a repo id: expected OWNER/NAME (expected OWNER/REPO[@BRANCH])");
  EXPECT_EQ(with({"--push-to", "me/m", "--dry-run"}),
            "--push-to pushes what the command writes, and --dry-run writes nothing");
  EXPECT_EQ(with({"--create-pr"}), "--create-pr applies to --push-to OWNER/REPO[@BRANCH]");
  EXPECT_EQ(with({"--commit-message", "x"}), "--commit-message applies to --push-to OWNER/REPO[@BRANCH]");
  EXPECT_EQ(with({"--private"}), "--private applies to --push-to OWNER/REPO[@BRANCH]");
  // --private alone: a repo the push creates is private (the repo is created when missing, as `hf upload` does)
  EXPECT_TRUE(std::holds_alternative<CommandLine>(ParseCommandLine(std::vector<std::string>{
      "merge", "--base", "b", "--adapter", "a", "-o", "out", "--push-to", "me/m", "--private"})));
  EXPECT_EQ(with({"--push-to", "me/m", "--commit-message="}), "--commit-message is empty");
  EXPECT_EQ(with({"--push-to", "me/m", "--push-to", "me/n"}), "--push-to given twice");
}

TEST(PushCommand, PushDirToRepoTakesThePushOptions) {
  auto p = Ok({"push", "out", "--to", "me/m@dev", "--create-pr", "--commit-message", "again", "--private"});
  EXPECT_EQ(p.command, "push");
  EXPECT_EQ(p.positional, std::vector<std::string>{"out"});
  EXPECT_EQ(p.Value("to"), "me/m@dev");
  EXPECT_EQ(Usage({"push", "out"}), "--to is required");
  EXPECT_EQ(Usage({"push", "--to", "me/m"}), "expected exactly one DIR (a folder, or one file)");
  EXPECT_EQ(Usage({"push", "a", "b", "--to", "me/m"}), "expected exactly one DIR (a folder, or one file)");
  EXPECT_EQ(Usage({"push", "out", "--to", "hf://me/m"}),
            "--to `hf://me/m`: expected OWNER/REPO[@BRANCH], a repo id, not a URL (the endpoint is HF_ENDPOINT's)");
  EXPECT_EQ(Usage({"push", "out", "--to", "me/m", "--push-to", "me/n"}), "unknown option `--push-to`");
  EXPECT_EQ(Usage({"push", "out", "--create-pr", "--to", "me"}),
            "--to `me`: `me` is not a repo id: expected OWNER/NAME (expected OWNER/REPO[@BRANCH])");
  EXPECT_NE(CliHelp("push").find("usage: peft-bridge push DIR --to OWNER/REPO[@BRANCH]"), std::string_view::npos);
  EXPECT_NE(CliHelp("").find("push DIR --to OWNER/REPO[@BRANCH]"), std::string_view::npos);
}

// huggingface_hub's create_repo(exist_ok=True), which `hf upload` calls before it uploads.
TEST(PushCommand, AMissingRepoIsCreatedAnExistingOneIsPushedTo) {
  EXPECT_EQ(ClassifyCreateRepoAnswer(200), CreateRepoAnswer::kCreated);
  EXPECT_EQ(ClassifyCreateRepoAnswer(409), CreateRepoAnswer::kExists);
  for (int refused : {401, 402, 403})
    EXPECT_EQ(ClassifyCreateRepoAnswer(refused), CreateRepoAnswer::kAskWhetherItExists);
  for (int failed : {0, 400, 404, 429, 500}) EXPECT_EQ(ClassifyCreateRepoAnswer(failed), CreateRepoAnswer::kFailed);
}

TEST(PushCommand, AFoldersFilesAsUploadFolderTakesThem) {
  auto files = PushFolderFiles("out", {{"model.safetensors", EntryKind::kFile},
                                       {".git", EntryKind::kDirectory},
                                       {".git/config", EntryKind::kFile},
                                       {"sub", EntryKind::kDirectory},
                                       {"sub/b.json", EntryKind::kFile},
                                       {".cache/huggingface", EntryKind::kDirectory},
                                       {".cache/huggingface/upload.lock", EntryKind::kFile},
                                       {".gitattributes", EntryKind::kFile},
                                       {"config.json.tmp-a1B2c3", EntryKind::kFile},
                                       {"config.json", EntryKind::kFile}});
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_EQ(files.value(),
            (std::vector<std::string>{".gitattributes", "config.json", "model.safetensors", "sub/b.json"}));
  auto journal =
      PushFolderFiles("out", {{"model.safetensors", EntryKind::kFile}, {".peft-bridge-commit", EntryKind::kFile}});
  ASSERT_FALSE(journal.ok());
  EXPECT_EQ(journal.error().message,
            "`out` holds the journal of an interrupted peft-bridge run (.peft-bridge-commit): its output is not "
            "complete; run the command into it again, which completes or undoes that run");
  auto fifo = PushFolderFiles("out", {{"a.safetensors", EntryKind::kFile}, {"pipe", EntryKind::kOther}});
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.error().message, "`out/pipe` is neither a file nor a folder: nothing to push for it");
  auto empty = PushFolderFiles("out", {{".git", EntryKind::kDirectory}});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "`out` holds no file to push");
}

TEST(PushCommand, AFailedPushSaysHowToPushTheWrittenOutputAgain) {
  auto hint = [](std::vector<std::string> args) {
    auto line = Ok(std::move(args));
    return PushRetryHint(line, std::get<PushTarget>(ParsePushTarget(*line.Value("push-to"))));
  };
  EXPECT_EQ(hint({"merge", "--base", "b", "--adapter", "a", "-o", "out/merged", "--push-to", "me/m"}),
            "; the output is complete in `out/merged`: push it with `peft-bridge push out/merged --to me/m`");
  EXPECT_EQ(hint({"translate", "in", "my out", "--to", "mlx", "--push-to", "me/m@dev", "--create-pr", "--private"}),
            "; the output is complete in `my out`: push it with `peft-bridge push 'my out' --to me/m@dev --create-pr "
            "--private`");
}

TEST(PushTarget, HelpNamesIt) {
  for (const char* command : {"merge", "translate", "combine", "extract", "create"})
    EXPECT_NE(CliHelp(command).find("--push-to OWNER/REPO[@BRANCH]"), std::string_view::npos) << command;
  EXPECT_EQ(CliHelp("unmerge").find("--push-to"), std::string_view::npos);
  EXPECT_NE(CliHelp("").find("--push-to OWNER/REPO[@BRANCH]"), std::string_view::npos);
}

TEST(PushTarget, Summary) {
  PushOutcome o;
  o.target = {"me/m", "main"};
  o.commit = "0123456789abcdef0123456789abcdef01234567";
  o.commit_url = "http://hub/me/m/commit/0123456789abcdef0123456789abcdef01234567";
  o.files = {{"model.safetensors", 1'200'000'000, true}, {"config.json", 700, false}};
  EXPECT_EQ(RenderPushOutcome(o), "pushed 2 files (1 through LFS), 1.20 GB to me/m@main: commit 0123456789ab\n"
                                  "  http://hub/me/m/commit/0123456789abcdef0123456789abcdef01234567\n");
  o.create_pr = true;
  o.pull_request_url = "http://hub/me/m/discussions/1";
  o.files.pop_back();
  EXPECT_EQ(RenderPushOutcome(o),
            "opened a pull request on me/m (against main) with 1 file (1 through LFS), 1.20 GB: commit 0123456789ab\n"
            "  http://hub/me/m/discussions/1\n");
  EXPECT_EQ(
      RenderPushOutcomeJson(
          R"({"repo":"me/m","branch":"dev","commit":"abc","url":"u","files":[{"path":"a.json","size":2,"lfs":false}]})"),
      "pushed 1 file, 2 B to me/m@dev: commit abc\n  u\n");
  EXPECT_EQ(PushCommitTitle("merge", 3), "peft-bridge merge: 3 files");
  EXPECT_EQ(PushCommitTitle("create", 1), "peft-bridge create: 1 file");
}

}  // namespace
}  // namespace pb::app
