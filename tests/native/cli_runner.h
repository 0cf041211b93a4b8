// Running the native CLI from a test as a user would (PB_CLI_PATH, set by tests/CMakeLists.txt), and writing the
// files it reads: shared by the CLI test files.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace pb::testing {

struct CliResult {
  int status;       // the exit status, or -1 when the CLI did not exit normally
  std::string out;  // stdout, and stderr after it when asked for
};

// Runs the CLI with a shell-quoted argument string; stderr goes to /dev/null unless `with_stderr`.
inline CliResult RunCli(const std::string& args, bool with_stderr = false) {
  const std::string cmd = std::string(PB_CLI_PATH) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

inline void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}
inline void WriteFile(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace pb::testing
