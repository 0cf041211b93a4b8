// `combine`'s numeric options, read once for both CLIs: --weights W1,W2,… (finite numbers, negative allowed),
// --rank N, --density D, --svd-clamp Q, --seed S. The grammar (command_line.cc) calls CheckCombineNumbers so a
// malformed number is a usage error (exit 2); the commands then read them with CombineOptionsOf.
#pragma once

#include <optional>
#include <string>

#include "app/command_line.h"
#include "compose/combine_options.h"
#include "core/json.h"
#include "core/result.h"

namespace pb::app {

// The usage message for the first malformed number, or nullopt.
std::optional<std::string> CheckCombineNumbers(const CommandLine& line);

// The options of a command line CheckCombineNumbers accepted (weights empty when --weights is absent: 1 each).
compose::CombineOptions CombineOptionsOf(const CommandLine& line);

// The options as the JS API's keys (combine's option table, app/option_tables.h): what the npm CLI hands to the
// WASM module for its command line.
Json CombineOptionsToJson(const compose::CombineOptions& options);

}  // namespace pb::app
