#include "cli/naming_table_files.h"

#include <string>
#include <vector>

#include "app/user_naming_tables.h"
#include "cli/file_io.h"

namespace pb::cli {

Result<std::shared_ptr<const adapter::NamingTables>> LoadNamingTables(const app::CommandLine& line) {
  const std::vector<std::string> paths = line.Values("naming-table");
  std::vector<std::string> texts;
  texts.reserve(paths.size());
  for (const auto& path : paths) {
    PB_ASSIGN_OR_RETURN(auto bytes, ReadWholeFile(path));
    texts.emplace_back(bytes.begin(), bytes.end());
  }
  std::vector<adapter::EmbeddedFile> files;
  for (size_t i = 0; i < paths.size(); ++i) files.push_back({paths[i], texts[i]});
  return app::TablesWithUserFiles(files);
}

}  // namespace pb::cli
