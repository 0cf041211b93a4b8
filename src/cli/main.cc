// peft-bridge native CLI: argument dispatch only; the commands live in *_command.cc.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/cli_text.h"
#include "core/report.h"

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

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
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
  return pb::cli::UsageError("", "unknown command `" + command + "`");
}
