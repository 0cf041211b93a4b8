// Naming tables supplied at run time (`--naming-table FILE`, repeatable, in both CLIs; `namingTables` in the JS
// API): "a new model family by dropping in a translation file, without recompiling". The embedded tables stay
// the default; a user table adds a family, or replaces the embedded table of the same name.
#pragma once

#include <memory>
#include <span>

#include "adapter/naming_tables.h"
#include "core/result.h"

namespace pb::app {

// The embedded tables followed by `user_files` ({path, JSON text}, in the order given; a later table of the
// same name replaces an earlier one). Null when `user_files` is empty (callers then use the embedded tables).
// InvalidConfig naming the file and the field of the first table that does not follow docs/naming-tables.md.
Result<std::shared_ptr<const adapter::NamingTables>> TablesWithUserFiles(
    std::span<const adapter::EmbeddedFile> user_files);

}  // namespace pb::app
