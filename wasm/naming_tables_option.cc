#include "naming_tables_option.h"

#include <emscripten/bind.h>

#include <string>
#include <vector>

#include "app/report.h"
#include "app/user_naming_tables.h"

namespace pb::wasm {

Result<std::shared_ptr<const adapter::NamingTables>> NamingTablesOption(const Json& options) {
  if (!options.is_object() || !options.contains("namingTables") || options["namingTables"].is_null())
    return std::shared_ptr<const adapter::NamingTables>();
  const Json& list = options["namingTables"];
  auto bad = [] {
    return MakeError(ErrorCode::InvalidArgument, "namingTables must be an array of {path, text} naming tables");
  };
  if (!list.is_array()) return bad();
  std::vector<std::string> paths, texts;
  for (const Json& f : list) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("text") ||
        !f["text"].is_string())
      return bad();
    paths.push_back(f["path"].get<std::string>());
    texts.push_back(f["text"].get<std::string>());
  }
  std::vector<adapter::EmbeddedFile> files;
  for (size_t i = 0; i < paths.size(); ++i) files.push_back({paths[i], texts[i]});
  return app::TablesWithUserFiles(files);
}

}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge_naming_tables) {
  // The npm CLI checks --naming-table files before it reads any input, where the native CLI does: "" when the
  // tables are valid, else the error as RenderErrorJson writes it.
  emscripten::function(
      "namingTablesError", +[](const std::string& options_json) {
        auto options = pb::ParseJson(options_json, "options");
        if (!options.ok()) return pb::RenderErrorJson(options.error());
        auto tables = pb::wasm::NamingTablesOption(options.value());
        return tables.ok() ? std::string() : pb::RenderErrorJson(tables.error());
      });
}
