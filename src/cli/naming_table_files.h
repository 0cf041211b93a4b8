// `--naming-table FILE` (repeatable) for the native CLI: reads the files; the rule of what they mean is the
// shared layer's (app/user_naming_tables.h), which the npm CLI and the JS API use as well.
#pragma once

#include <memory>

#include "adapter/naming_tables.h"
#include "app/command_line.h"
#include "core/result.h"

namespace pb::cli {

// The tables the command's --naming-table files add to the embedded ones; null when it names none. A file
// that cannot be read is an IoError naming it; a malformed table, InvalidConfig naming the file and field.
Result<std::shared_ptr<const adapter::NamingTables>> LoadNamingTables(const app::CommandLine& line);

}  // namespace pb::cli
