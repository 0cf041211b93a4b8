#include "app/user_naming_tables.h"

namespace pb::app {

Result<std::shared_ptr<const adapter::NamingTables>> TablesWithUserFiles(
    std::span<const adapter::EmbeddedFile> user_files) {
  if (user_files.empty()) return std::shared_ptr<const adapter::NamingTables>();
  auto tables = std::make_shared<adapter::NamingTables>(adapter::NamingTables::Builtin());
  PB_RETURN_IF_ERROR(tables->Add(user_files));
  return std::shared_ptr<const adapter::NamingTables>(std::move(tables));
}

}  // namespace pb::app
