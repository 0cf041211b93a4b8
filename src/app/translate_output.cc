#include "app/translate_output.h"

namespace pb::app {

bool TranslateOutputIsFile(adapter::AdapterFormat to, std::string_view out) {
  return to == adapter::AdapterFormat::kGguf && out.size() > 5 && out.ends_with(".gguf");
}

std::vector<std::string> TranslateOutputNames(adapter::AdapterFormat to, std::string_view out) {
  const adapter::FormatTable& table = adapter::BuiltinFormatTable(to);
  std::vector<std::string> names;
  if (TranslateOutputIsFile(to, out)) {
    const size_t slash = out.rfind('/');
    names.emplace_back(out.substr(slash == std::string_view::npos ? 0 : slash + 1));
  } else {
    names.push_back(table.weights_file);
  }
  if (table.config_file) names.push_back(*table.config_file);
  return names;
}

}  // namespace pb::app
