// Where translate writes: into OUT_DIR (the format's files, e.g. adapter_model.gguf), or, for --to gguf and an
// OUT that ends in ".gguf", that one file, since llama.cpp's --lora and llama-server take a file. Both CLIs and
// the JS API ask here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "adapter/format_table.h"

namespace pb::app {

bool TranslateOutputIsFile(adapter::AdapterFormat to, std::string_view out);

// The files translate writes for `to` into OUT, in the order it writes them: the weights file (OUT's own name when
// OUT is one file, else the format's weights file), then the format's config file when it has one. The names a
// CLI describes the output by before the job runs; the job checks that its output holds exactly these.
std::vector<std::string> TranslateOutputNames(adapter::AdapterFormat to, std::string_view out);

}  // namespace pb::app
