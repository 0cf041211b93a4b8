#include "merge/model_index.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "adapter/python_json.h"

namespace pb::merge {

Status ValidateShardName(const std::string& name) {
  bool bad = name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
             name.find('\\') != std::string::npos || name.find('\0') != std::string::npos || name.starts_with(".") ||
             !name.ends_with(".safetensors");
  if (bad)
    return MakeError(ErrorCode::InvalidConfig, "model.safetensors.index.json: shard name `" + name +
                                                   "` is not a plain .safetensors file name (no paths, no traversal)");
  return Status::Ok();
}

Result<std::vector<std::string>> ShardNamesFromIndex(const std::string& index_json) {
  auto j = nlohmann::ordered_json::parse(index_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return MakeError(ErrorCode::InvalidConfig, "model.safetensors.index.json has no weight_map object");
  std::vector<std::string> names;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string())
      return MakeError(ErrorCode::InvalidConfig, "model.safetensors.index.json: weight_map[\"" + tensor + "\"] is not a string");
    std::string f = file.get<std::string>();
    if (Status s = ValidateShardName(f); !s.ok()) return s.error();
    if (std::find(names.begin(), names.end(), f) == names.end()) names.push_back(f);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string OutputIndexJson(const std::string& input_index_json, const MergePlan& plan) {
  auto j = nlohmann::ordered_json::parse(input_index_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) j = nlohmann::ordered_json::object();
  if (!j.contains("metadata") || !j["metadata"].is_object()) j["metadata"] = nlohmann::ordered_json::object();
  j["metadata"]["total_size"] = plan.total_tensor_bytes;
  for (const auto& shard : plan.shards)
    for (const auto& t : shard.tensors)
      if (t.op == TensorOp::kAdd) j["weight_map"][t.name] = shard.name;
  return adapter::DumpPythonJson(j) + "\n";
}

}  // namespace pb::merge
