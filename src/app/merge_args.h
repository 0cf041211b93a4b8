// The merge options of a command line (`merge`, `unmerge`, `convert --quantize`), read once for the native CLI and
// the WASM merge handles (whose JS options object becomes a command line: app/option_tables.h).
#pragma once

#include "app/command_line.h"
#include "core/result.h"
#include "merge/merge_plan.h"

namespace pb::app {

// --dtype, --safe, --quantize with --scheme and --group-size, --allow-partial, --arch; unmerge for the `unmerge`
// command or `unmerge` (the JS API's key, which has no CLI spelling). The naming tables and key mapping are the
// caller's. An error only for a --quantize combination the grammar did not see (it checks them all).
Result<merge::MergeOptions> MergeOptionsOf(const CommandLine& line, bool unmerge);

}  // namespace pb::app
