// Native CLI commands. Each returns the process exit status: 0 ok, 1 invalid input or I/O failure,
// 2 usage error.
#pragma once

#include <string>
#include <vector>

#include "app/command_line.h"
#include "app/input_hint.h"
#include "core/error.h"

namespace pb::cli {

// Each takes the command line as the shared grammar (src/app/command_line.h) parsed it: options are known,
// values checked against their choices, required ones present; help and usage errors never reach a command.
int RunInspect(const app::CommandLine& line);
int RunConvert(const app::CommandLine& line);
int RunAdapterInfo(const app::CommandLine& line);
int RunTranslate(const app::CommandLine& line);
int RunMerge(const app::CommandLine& line);
int RunCombine(const app::CommandLine& line);
int RunCreate(const app::CommandLine& line);
int RunExtract(const app::CommandLine& line);
// --push-to: pushes the files the command committed (push_command.cc); 0, or 1 after reporting the failure.
int RunPush(const app::CommandLine& line);
// `push DIR --to OWNER/REPO[@BRANCH]`: a folder's files (or one file), pushed as --push-to pushes an output.
int RunPushCommand(const app::CommandLine& line);

// app::ExplainInputError with the facts of `path` (an input as the user named it).
Error ExplainInput(Error error, const std::string& path, app::InputRole role);

// Reports invalid input or an I/O failure (JSON on stdout, or text on stderr); returns 1.
int ReportFailure(const Error& error, bool json);

// Prints a usage error (one line and a hint) to stderr, or under --json a JSON error on stdout; returns 2.
int UsageError(const app::UsageError& error);

}  // namespace pb::cli
