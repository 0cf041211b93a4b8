// peft-bridge native CLI: argument dispatch only; the commands live in *_command.cc.
#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/interrupts.h"
#include "app/cli_text.h"
#include "app/command_line.h"
#include "app/report.h"
#include "cli/text_output.h"

namespace pb::cli {

int UsageError(const app::UsageError& error) {
  WriteText(error.json ? stdout : stderr, app::RenderUsageError(error));
  return 2;
}

Error ExplainInput(Error error, const std::string& path, app::InputRole role) {
  struct stat st;
  return app::ExplainInputError(std::move(error), {path, IsDirectory(path), ::lstat(path.c_str(), &st) == 0}, role);
}

int ReportFailure(const Error& error, bool json) {
  std::string out = json ? RenderErrorJson(error) : RenderErrorText(error);
  WriteText(json ? stdout : stderr, out);
  return 1;
}

}  // namespace pb::cli

namespace {

// Output that cannot be written (a full disk) is a failure, not a silent success. A reader that closed the
// pipe (`| head`) wanted no more: that ends quietly with the command's own status, as in other Unix tools.
int FinishStdout(int status) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    if (errno == EPIPE) return status;
    std::fprintf(stderr, "error: IoError: cannot write to standard output: %s\n", std::strerror(errno));
    return 1;
  }
  return status;
}

int Run(const std::vector<std::string>& args);

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);    // a closed pipe shows up as a write error, reported above
  pb::cli::StartInterruptThread();  // before any other thread: SIGINT/SIGTERM/SIGHUP wait for a commit to end
  return FinishStdout(Run(std::vector<std::string>(argv + 1, argv + argc)));
}

namespace {

int Run(const std::vector<std::string>& args) {
  auto print = [](std::string_view text) { pb::cli::WriteText(stdout, text); };
  auto parsed = pb::app::ParseCommandLine(args);
  if (auto* usage = std::get_if<pb::app::UsageError>(&parsed)) return pb::cli::UsageError(*usage);
  const auto& line = std::get<pb::app::CommandLine>(parsed);
  if (line.help) {
    print(pb::CliHelp(line.command));
    return 0;
  }
  if (line.version) {
    print(std::string("peft-bridge ") + std::string(pb::kVersion) + "\n");
    return 0;
  }
  if (line.command == "inspect") return pb::cli::RunInspect(line);
  // convert --quantize, or of a model's folder or index, writes a model folder (shards, index, config.json) as merge
  // does, with no adapter.
  if (line.command == "convert") {
    const bool folder = pb::app::ConvertWritesModelFolder(line, pb::cli::IsDirectory(line.positional[0]));
    if (auto problem = pb::app::ConvertUsageProblem(line, folder))
      return pb::cli::UsageError({line.command, *problem, line.Has("json")});
    return folder ? pb::cli::RunMerge(line) : pb::cli::RunConvert(line);
  }
  if (line.command == "adapter-info") return pb::cli::RunAdapterInfo(line);
  if (line.command == "push") return pb::cli::RunPushCommand(line);
  // --push-to (merge, translate, combine, create, extract): what the command wrote, pushed once it succeeded.
  auto push = [&](int status) { return status == 0 && line.Has("push-to") ? pb::cli::RunPush(line) : status; };
  if (line.command == "create") return push(pb::cli::RunCreate(line));
  if (line.command == "extract") return push(pb::cli::RunExtract(line));
  if (line.command == "translate") return push(pb::cli::RunTranslate(line));
  if (line.command == "combine") return push(pb::cli::RunCombine(line));
  return push(pb::cli::RunMerge(line));  // merge or unmerge: the grammar knows no other command
}

}  // namespace
