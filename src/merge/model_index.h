// model.safetensors.index.json, as a merge reads and writes it. The rules live here so that the native CLI and
// the WASM edge (npm CLI, mergeShards, the web page, the edge worker) apply exactly the same ones.
#pragma once

#include <string>
#include <vector>

#include "merge/merge_plan.h"

namespace pb::merge {

// Shard names come from a downloaded index: they must be plain .safetensors file names inside the model
// directory (no separators, no traversal, no hidden files). InvalidConfig otherwise.
Status ValidateShardName(const std::string& name);

// The distinct shard names of an index's weight_map, validated, sorted. InvalidConfig on a malformed index.
Result<std::vector<std::string>> ShardNamesFromIndex(const std::string& index_json);

// The output index: the input's, with metadata.total_size recomputed (it changes with --dtype) and tensors
// the merge adds mapped to the shard holding them; Python json.dumps(indent=2) + "\n", as transformers writes.
std::string OutputIndexJson(const std::string& input_index_json, const MergePlan& plan);

}  // namespace pb::merge
