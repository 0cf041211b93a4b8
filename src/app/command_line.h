// The command-line grammar both CLIs share: the native one (src/cli) and the npm one (web/bin, through the WASM
// module) hand their argument vector to ParseCommandLine and act on the CommandLine it returns, so options,
// aliases, required arguments and every usage message are written once, here.
//
// Conventions (those of the hf CLI, llama.cpp and mergekit): `--opt value` and `--opt=value`; short aliases
// (`-o`, `-q`, `-V`, `-h`); flags take no value; `--` ends the options. A usage error is one line and a hint.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/dtype.h"

namespace pb::app {

struct CommandLine {
  std::string command;   // "inspect", "merge"...; empty for the top level (help, version)
  bool help = false;     // --help / -h: print CliHelp(command), exit 0
  bool version = false;  // --version / -V at the top level
  std::vector<std::string> positional;
  // Options by their long name without dashes ("dtype", "out"); flags map to "". Repeatable options keep
  // every value in order.
  std::map<std::string, std::vector<std::string>, std::less<>> options;

  bool Has(std::string_view name) const { return options.find(name) != options.end(); }
  // The value of a single-valued option.
  std::optional<std::string> Value(std::string_view name) const;
  std::vector<std::string> Values(std::string_view name) const;
};

struct UsageError {
  std::string command;  // whose help the hint names ("" for the top level)
  std::string message;
  bool json = false;  // the arguments ask for --json: the error is a JSON document on stdout
};

std::variant<CommandLine, UsageError> ParseCommandLine(std::span<const std::string> args);

// The options alone of `command` (no positional arguments, nothing required): every check of their values the
// command line gets (choices, the dtype vocabulary, numbers, --quantize's companions), for the options a JS
// options object gives (app/option_tables.h OptionsCommandLine).
std::variant<CommandLine, UsageError> ParseCommandOptions(std::string_view command, std::span<const std::string> args);

// "error: <message>\nrun `peft-bridge <command> --help` for usage\n": what both CLIs print on stderr (exit 2).
std::string RenderUsageError(const UsageError& error);

// Whether `convert IN OUT` writes a model folder (shards, index, config.json and the model's other files), as merge
// does with no adapter: with --quantize, or when IN is a model's folder (`in_is_directory`, the fact the CLI
// gathered), its index (*.safetensors.index.json) or a Hub repo or folder; else it converts one file into one.
bool ConvertWritesModelFolder(const CommandLine& line, bool in_is_directory);

// The usage error of a convert (`writes_folder`: ConvertWritesModelFolder's answer) given the other route's options
// (--order for a model folder; --dry-run, --base-config for one file) or, writing a folder, an OUT named like a
// .safetensors file; else nullopt. The grammar cannot tell: it depends on what IN is.
std::optional<std::string> ConvertUsageProblem(const CommandLine& line, bool writes_folder);

// CommandLine as JSON ({"command","help","version","positional":[...],"options":{"name":[values]}}) or
// {"usage_error": text}: the form the npm CLI receives from the WASM module.
std::string CommandLineJson(std::span<const std::string> args);

}  // namespace pb::app
