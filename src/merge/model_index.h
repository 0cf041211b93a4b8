// model.safetensors.index.json, as a merge reads and writes it. The rules live here so that the native CLI and
// the WASM edge (npm CLI, mergeShards, inspectRepo, the web page, the edge worker) apply exactly the same ones.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "merge/merge_plan.h"

namespace pb::merge {

inline constexpr const char* kIndexFileName = "model.safetensors.index.json";

// Shard names come from a downloaded index: they must be plain .safetensors file names inside the model
// directory (no separators, no traversal, no hidden files). InvalidConfig otherwise.
Status ValidateShardName(const std::string& name);

// An index as read: the document (kept for the output index) and the distinct shard names of its weight_map.
struct ModelIndex {
  Json document;
  std::vector<std::string> shard_names;  // validated, sorted, unique
};

// Reads an index before any other work: ParseJson's limits and syntax, then a weight_map that is a non-empty
// object of strings, each a valid shard name. InvalidConfig, naming the file, otherwise.
Result<ModelIndex> ParseModelIndex(std::string_view index_json);

// Every weight_map entry must be in the shard it names. `holds(shard, tensor)` says whether the shard holds
// the tensor, or nullopt when that shard was not given. InvalidArgument for a shard not given; InvalidConfig
// listing the first 20 entries a shard does not hold (the first one as the error's tensor), and how many.
using ShardHolds = std::function<std::optional<bool>(const std::string& shard, const std::string& tensor)>;
Status CheckIndexEntries(const ModelIndex& index, const ShardHolds& holds);

// CheckIndexEntries over the headers read (the merges).
Status CheckIndexAgainstShards(const ModelIndex& index, const std::vector<BaseShardHeader>& shards);

// The output index: the input's, with metadata.total_size recomputed (it changes with --dtype) and tensors
// the merge adds mapped to the shard holding them; Python json.dumps(indent=2) + "\n", as transformers writes.
std::string OutputIndexJson(const ModelIndex& index, const MergePlan& plan);

}  // namespace pb::merge
