// The JS API's `namingTables` option as the handles receive it: a JSON array of {path, text} (web/src/
// naming-tables.js builds it), turned into the tables by the shared rule (app/user_naming_tables.h).
#pragma once

#include <memory>

#include "adapter/naming_tables.h"
#include "core/json.h"
#include "core/result.h"

namespace pb::wasm {

// The tables of `options["namingTables"]`; null when absent, null or empty. InvalidArgument when it is not
// an array of {path: string, text: string}; InvalidConfig (naming the path) for a malformed table.
Result<std::shared_ptr<const adapter::NamingTables>> NamingTablesOption(const Json& options);

}  // namespace pb::wasm
