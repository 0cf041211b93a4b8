// Native CLI commands. Each returns the process exit status: 0 ok, 1 invalid input or I/O failure,
// 2 usage error.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace pb::cli {

int RunInspect(const std::vector<std::string>& args);
int RunConvert(const std::vector<std::string>& args);
int RunAdapterInfo(const std::vector<std::string>& args);
int RunTranslate(const std::vector<std::string>& args);
int RunMerge(const std::vector<std::string>& args, bool unmerge);

// Reports invalid input or an I/O failure (JSON on stdout, or text on stderr); returns 1.
int ReportFailure(const Error& error, bool json);

// Prints a usage error and the command's help to stderr; returns 2.
int UsageError(const std::string& command, const std::string& message);

}  // namespace pb::cli
