// Where translate writes: into OUT_DIR (the format's files, e.g. adapter_model.gguf), or, for --to gguf and an
// OUT that ends in ".gguf", that one file, since llama.cpp's --lora and llama-server take a file. Both CLIs and
// the JS API ask here.
#pragma once

#include <string_view>

#include "adapter/format_table.h"

namespace pb::app {

bool TranslateOutputIsFile(adapter::AdapterFormat to, std::string_view out);

}  // namespace pb::app
