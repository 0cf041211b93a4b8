// The base model's other files in a merged folder: a merge copies every file of the base directory that is not
// a weight file (tokenizer.json, tokenizer_config.json, special_tokens_map.json, tokenizer.model,
// generation_config.json, chat templates, README.md...) so the output loads as a model, as mergekit copies the
// tokenizer by default. `--no-copy-extra` opts out. Sans-I/O: the CLI lists the base directory, this decides
// (and words the warnings), the CLI copies inside the merge's all-or-nothing output.
//
// Not copied: weight files (IsWeightFile), the names the merge writes itself (shards, index, config.json),
// hidden entries (.gitattributes, .cache/), subdirectories and anything but a file (or a link to one), and a name
// that is not a plain name (a '/', '\\' or NUL in it: a listing the JS API's caller gave). Nothing
// is copied when --base names a .safetensors file: the directory it is in need not be the model's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "app/output_policy.h"

namespace pb::app {

// One entry of the base directory: its name and what it is once links are followed (a dangling link: kOther).
struct BaseEntry {
  std::string name;
  EntryKind kind = EntryKind::kFile;
};

// Weights in any format, their indexes and adapter files: *.safetensors, *.index.json, *.bin, *.pt, *.pth,
// *.ckpt, *.gguf, *.h5, *.msgpack, *.onnx, adapter_config.json, adapter_model.*.
bool IsWeightFile(std::string_view name);

struct ExtraFilesRequest {
  std::string base_path;             // --base as given (messages)
  bool base_is_directory = false;    // --base names a directory
  std::vector<BaseEntry> listing;    // its entries (when a directory)
  std::vector<std::string> written;  // the names the merge writes itself
  bool writes_config = false;        // the output gets a config.json
  bool copy_extra = true;            // false with --no-copy-extra
};

struct ExtraFiles {
  std::vector<std::string> copy;  // base files to copy into the output, in byte order of their names
  std::string warnings;           // stderr text, one "warning: " line each (empty when none)
};

ExtraFiles PlanExtraFiles(const ExtraFilesRequest& request);

}  // namespace pb::app
