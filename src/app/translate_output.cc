#include "app/translate_output.h"

namespace pb::app {

bool TranslateOutputIsFile(adapter::AdapterFormat to, std::string_view out) {
  return to == adapter::AdapterFormat::kGguf && out.size() > 5 && out.ends_with(".gguf");
}

}  // namespace pb::app
