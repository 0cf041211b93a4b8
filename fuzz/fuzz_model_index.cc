// libFuzzer target for model.safetensors.index.json: ShardNamesFromIndex and OutputIndexJson.
//
// Input: part 0 = the index text; part 1 (optional) = names of tensors a merge adds (one per line, up to 16),
// spread over the shards; the first 8 bytes of part 2 (optional) = the plan's total_tensor_bytes. Compact
// encoding expanded first.
//
// Checks (abort() on failure):
//   - a rejected index is InvalidConfig with a message; accepted shard names are sorted, unique and each
//     passes ValidateShardName;
//   - OutputIndexJson (called, as by both CLIs, only on an accepted index) is JSON ending in "\n", holds
//     metadata.total_size = the plan's total, maps every added tensor to the shard that holds it, and is
//     itself accepted with the same shard names.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "json_mutator.h"
#include "known_bugs.h"
#include "merge/model_index.h"

namespace {

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_model_index: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {"metadata", "weight_map", "total_size", "model.embed_tokens.weight", "lm_head.weight", "format"},
    {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors", "../x.safetensors",
     "a/b.safetensors", ".hidden.safetensors", "x.bin", "..", ".", "a\\b.safetensors", "model.layers.0.mlp.up_proj.weight"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 3);
  const std::string index(parts[0]);
  using pb::fuzz::KnownBug;
  if (pb::fuzz::SkipKnownJsonBugs(index)) return 0;

  auto names = pb::merge::ShardNamesFromIndex(index);
  if (!names.ok()) {
    if (names.error().code != pb::ErrorCode::InvalidConfig || names.error().message.empty())
      Fail("a rejected index is not InvalidConfig with a message", names.error().message);
    return 0;
  }
  const std::vector<std::string>& shard_names = names.value();
  for (size_t i = 0; i < shard_names.size(); ++i) {
    if (!pb::merge::ValidateShardName(shard_names[i]).ok()) Fail("an invalid shard name was accepted", shard_names[i]);
    if (i > 0 && !(shard_names[i - 1] < shard_names[i])) Fail("shard names not sorted and unique", shard_names[i]);
  }
  // An index without shards is accepted here; the CLI then takes .front() of the list (a known bug).
  if (shard_names.empty()) return 0;
  // (Deep nesting is filtered above: ordered_json's parse copies recursively, and OutputIndexJson writes with
  // DumpPythonJson, which recurses once per level without the depth check ParseLoraConfig has.)

  pb::merge::MergePlan plan;
  for (const auto& n : shard_names) plan.shards.push_back({n, {}, {}});
  std::vector<std::pair<std::string, std::string>> added;  // tensor -> shard, last one wins
  if (parts.size() > 1) {
    std::string_view lines = parts[1];
    for (size_t k = 0; !lines.empty() && k < 16; ++k) {
      size_t nl = lines.find('\n');
      std::string name(lines.substr(0, nl));
      lines = nl == std::string_view::npos ? std::string_view() : lines.substr(nl + 1);
      auto& shard = plan.shards[k % plan.shards.size()];
      pb::merge::PlannedTensor t;
      t.name = name;
      t.op = pb::merge::TensorOp::kAdd;
      shard.tensors.push_back(t);
      added.emplace_back(name, shard.name);
    }
  }
  if (parts.size() > 2) std::memcpy(&plan.total_tensor_bytes, parts[2].data(), std::min<size_t>(8, parts[2].size()));

  const std::string out = pb::merge::OutputIndexJson(index, plan);
  if (out.empty() || out.back() != '\n') Fail("the output index does not end in a newline", out);
  auto j = nlohmann::ordered_json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) Fail("the output index is not a JSON object", out);
  const auto& total = j["metadata"]["total_size"];
  if (!total.is_number_unsigned() || total.get<uint64_t>() != plan.total_tensor_bytes)
    Fail("metadata.total_size is not the plan's total", out);
  for (const auto& [tensor, shard] : added) {
    std::string want = shard;
    for (const auto& [t2, s2] : added)
      if (t2 == tensor) want = s2;  // the last mapping of a repeated name
    const auto& got = j["weight_map"][tensor];
    if (!got.is_string() || got.get<std::string>() != want) Fail("an added tensor is not mapped to its shard", tensor);
  }
  auto again = pb::merge::ShardNamesFromIndex(out);
  if (!again.ok()) Fail("the output index is rejected: " + again.error().message, out);
  if (again.value() != shard_names) Fail("the output index names other shards", out);
  return 0;
}
