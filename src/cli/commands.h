// Native CLI commands. Each returns the process exit status: 0 ok, 1 invalid input or I/O failure,
// 2 usage error.
#pragma once

#include <string>
#include <vector>

namespace pb::cli {

int RunInspect(const std::vector<std::string>& args);
int RunConvert(const std::vector<std::string>& args);

// Prints a usage error and the command's help to stderr; returns 2.
int UsageError(const std::string& command, const std::string& message);

}  // namespace pb::cli
