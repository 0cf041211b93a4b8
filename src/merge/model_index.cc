#include "merge/model_index.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "text/python_json.h"

namespace pb::merge {
namespace {

Error Invalid(const std::string& message) {
  return MakeError(ErrorCode::InvalidConfig, std::string(kIndexFileName) + ": " + message);
}

}  // namespace

Status ValidateShardName(const std::string& name) {
  bool bad = name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
             name.find('\\') != std::string::npos || name.find('\0') != std::string::npos || name.starts_with(".") ||
             !name.ends_with(".safetensors");
  if (bad)
    return Invalid("shard name `" + ClipForMessage(name) +
                   "` is not a plain .safetensors file name (no paths, no traversal)");
  return Status::Ok();
}

Result<ModelIndex> ParseModelIndex(std::string_view index_json) {
  PB_ASSIGN_OR_RETURN(auto parsed, ParseJson(index_json, kIndexFileName));
  ModelIndex index{std::move(parsed), {}};
  const Json& j = index.document;
  auto map = j.is_object() ? j.find("weight_map") : j.end();
  if (!j.is_object() || map == j.end() || !map->is_object()) return Invalid("has no weight_map object");
  // An empty map names no shard: there would be nothing to read and nothing to write.
  if (map->empty()) return Invalid("weight_map is empty: it names no shard");
  std::set<std::string> names;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) return Invalid("weight_map[\"" + ClipForMessage(tensor) + "\"] is not a string");
    const auto& f = file.get_ref<const std::string&>();
    if (names.contains(f)) continue;
    PB_RETURN_IF_ERROR(ValidateShardName(f));
    names.insert(f);
  }
  index.shard_names.assign(names.begin(), names.end());
  return index;
}

Status CheckIndexEntries(const ModelIndex& index, const ShardHolds& holds) {
  std::string missing;
  std::optional<std::string> first;
  size_t count = 0;
  for (const auto& [tensor, file] : index.document["weight_map"].items()) {
    const auto& shard = file.get_ref<const std::string&>();  // ParseModelIndex checked the types
    const std::optional<bool> held = holds(shard, tensor);
    if (!held) return MakeError(ErrorCode::InvalidArgument, "shard `" + ClipForMessage(shard) + "` was not given");
    if (*held) continue;
    if (!first) first = tensor;
    if (++count <= 20) missing += "\n  " + ClipForMessage(tensor) + " (in " + shard + ")";
  }
  if (count)
    return MakeError(
        ErrorCode::InvalidConfig,
        std::to_string(count) + " tensor(s) of " + kIndexFileName + " are not in the shard it names:" + missing, first);
  return Status::Ok();
}

Status CheckIndexAgainstShards(const ModelIndex& index, const std::vector<BaseShardHeader>& shards) {
  std::unordered_map<std::string_view, const Header*> by_name;
  for (const auto& s : shards) by_name.emplace(s.name, s.header);
  return CheckIndexEntries(index, [&](const std::string& shard, const std::string& tensor) -> std::optional<bool> {
    auto it = by_name.find(shard);
    if (it == by_name.end()) return std::nullopt;
    return it->second->Find(tensor).has_value();
  });
}

std::string OutputIndexJson(const ModelIndex& index, const MergePlan& plan) {
  Json j = index.document;  // an object with a weight_map object: ParseModelIndex checked it
  if (!j.contains("metadata") || !j["metadata"].is_object()) j["metadata"] = Json::object();
  j["metadata"]["total_size"] = plan.total_tensor_bytes;
  std::set<std::string> renamed;  // --quantize: `<m>.weight` written as `<m>.weight_packed`
  for (const auto& shard : plan.shards)
    for (const auto& t : shard.tensors) {
      if (t.op == TensorOp::kAdd) j["weight_map"][t.name] = shard.name;
      if (!t.quantized) continue;
      if (t.quantized->weight != t.name) renamed.insert(t.name);
      for (const std::string* name : {&t.quantized->weight, &t.quantized->scale, &t.quantized->shape})
        if (!name->empty()) j["weight_map"][*name] = shard.name;
    }
  if (!renamed.empty()) {
    Json map = Json::object();
    for (const auto& [tensor, file] : j["weight_map"].items())
      if (!renamed.count(tensor)) map[tensor] = file;
    j["weight_map"] = std::move(map);
  }
  return text::DumpPythonJson(j) + "\n";
}

}  // namespace pb::merge
