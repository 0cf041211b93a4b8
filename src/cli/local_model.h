// A local model's files, chosen by the rule a remote one's are (app/base_layout.h): a folder's index and its
// shards, else its model.safetensors; an index file's shards beside it; else the one file named. merge/unmerge
// --base, convert of a model and inspect of a folder or an index read a local model through it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "merge/model_index.h"

namespace pb::cli {

struct LocalModelFiles {
  bool is_directory = false;
  std::string dir;  // the folder, or the one the named file is in
  std::vector<std::string> shard_names;
  std::optional<merge::ModelIndex> index;
};

Result<LocalModelFiles> ChooseLocalModel(const std::string& path);

// `inspect DIR` or `inspect DIR/model.safetensors.index.json`: every shard's report under its name and the totals
// (app/report.h's RenderInspectFiles*), as `inspect hf://…` gives for a Hub repo; the index checked against them.
Result<std::string> InspectLocalModel(const std::string& path, bool json);

}  // namespace pb::cli
