// peft-bridge native CLI: argument dispatch only; the commands live in *_command.cc.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "app/cli_text.h"
#include "app/report.h"

namespace pb::cli {

int UsageError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "error: %s\n\n", message.c_str());
  std::string_view help = CliHelp(command);
  std::fwrite(help.data(), 1, help.size(), stderr);
  return 2;
}

int ReportFailure(const Error& error, bool json) {
  std::string out = json ? RenderErrorJson(error) : RenderErrorText(error);
  std::fwrite(out.data(), 1, out.size(), json ? stdout : stderr);
  return 1;
}

}  // namespace pb::cli

namespace {

// Output that cannot be written (a full disk, a closed pipe) is a failure, not a silent success.
int FinishStdout(int status) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "error: IoError: cannot write to standard output: %s\n", std::strerror(errno));
    return 1;
  }
  return status;
}

int Run(const std::vector<std::string>& args);

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe shows up as a write error, reported above
  return FinishStdout(Run(std::vector<std::string>(argv + 1, argv + argc)));
}

namespace {

int Run(const std::vector<std::string>& args) {
  auto print = [](std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); };
  if (args.empty()) return pb::cli::UsageError("", "missing command");
  const std::string command = args[0];
  if (command == "--help" || command == "-h" || command == "help") {
    print(pb::CliHelp(""));
    return 0;
  }
  if (command == "--version") {
    print(std::string("peft-bridge ") + std::string(pb::kVersion) + "\n");
    return 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "inspect") return pb::cli::RunInspect(rest);
  if (command == "convert") return pb::cli::RunConvert(rest);
  if (command == "adapter-info") return pb::cli::RunAdapterInfo(rest);
  if (command == "translate") return pb::cli::RunTranslate(rest);
  if (command == "merge") return pb::cli::RunMerge(rest, /*unmerge=*/false);
  if (command == "unmerge") return pb::cli::RunMerge(rest, /*unmerge=*/true);
  return pb::cli::UsageError("", "unknown command `" + command + "`");
}

}  // namespace
