// libFuzzer target for model.safetensors.index.json: ParseModelIndex, CheckIndexEntries and OutputIndexJson.
//
// Input: part 0 = the index text; part 1 (optional) = names of tensors a merge adds (one per line, up to 16),
// spread over the shards; the first 8 bytes of part 2 (optional) = the plan's total_tensor_bytes. Compact
// encoding expanded first (so an index can hold 100k entries, 1 MB names or 200k levels of nesting).
//
// Checks (abort() on failure):
//   - a rejected index is InvalidConfig with a message; an accepted one has a weight_map object of strings,
//     and its shard names are non-empty, sorted, unique, each passes ValidateShardName and is exactly the set
//     of weight_map values;
//   - CheckIndexEntries: a shard that holds everything passes; a shard not given is InvalidArgument; shards
//     that hold only tensors with names of even length fail exactly when an entry has an odd-length name,
//     naming the first such entry in file order;
//   - OutputIndexJson ends in "\n", parses (ParseJson) and is accepted by ParseModelIndex with the same
//     shard names, holds metadata.total_size = the plan's total, keeps every input entry the merge does not
//     re-map, maps every added tensor to the shard that holds it (the last mapping of a repeated name), and
//     is a fixed point: the output index of the re-parsed output with the same plan is the same text.
#include <algorithm>
#include <set>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "fuzz_input.h"
#include "json_mutator.h"
#include "core/utf8.h"
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
     "a/b.safetensors", ".hidden.safetensors", "x.bin", "..", ".", "a\\b.safetensors",
     "model.layers.0.mlp.up_proj.weight"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 3);
  const std::string index(parts[0]);
  auto parsed = pb::merge::ParseModelIndex(index);
  if (!parsed.ok()) {
    if (parsed.error().code != pb::ErrorCode::InvalidConfig || parsed.error().message.empty())
      Fail("a rejected index is not InvalidConfig with a message", parsed.error().message);
    return 0;
  }
  const pb::merge::ModelIndex& model_index = parsed.value();
  const std::vector<std::string>& shard_names = model_index.shard_names;
  if (shard_names.empty()) Fail("an index without shards was accepted");
  for (size_t i = 0; i < shard_names.size(); ++i) {
    if (!pb::merge::ValidateShardName(shard_names[i]).ok()) Fail("an invalid shard name was accepted", shard_names[i]);
    if (i > 0 && !(shard_names[i - 1] < shard_names[i])) Fail("shard names not sorted and unique", shard_names[i]);
  }
  const pb::Json& doc = model_index.document;
  if (!doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object())
    Fail("an accepted index has no weight_map object");
  const pb::Json& weight_map = doc["weight_map"];
  std::set<std::string> values;
  std::optional<std::string> first_odd;
  for (const auto& [tensor, file] : weight_map.items()) {
    if (!file.is_string()) Fail("a weight_map value is not a string", tensor);
    values.insert(file.get<std::string>());
    if (!first_odd && tensor.size() % 2 == 1) first_odd = tensor;
  }
  if (std::vector<std::string>(values.begin(), values.end()) != shard_names)
    Fail("the shard names are not the weight_map's values");

  // CheckIndexEntries with made-up shard contents.
  pb::Status all =
      pb::merge::CheckIndexEntries(model_index, [](const std::string&, const std::string&) { return true; });
  if (!all.ok()) Fail("shards holding everything fail the check: " + all.error().message);
  const std::string absent = shard_names.back();
  pb::Status missing_shard = pb::merge::CheckIndexEntries(
      model_index, [&](const std::string& shard, const std::string&) -> std::optional<bool> {
        if (shard == absent) return std::nullopt;
        return true;
      });
  if (missing_shard.ok() || missing_shard.error().code != pb::ErrorCode::InvalidArgument)
    Fail("a shard not given is not InvalidArgument", absent);
  pb::Status even = pb::merge::CheckIndexEntries(
      model_index, [](const std::string&, const std::string& tensor) { return tensor.size() % 2 == 0; });
  if (even.ok() != !first_odd) Fail("CheckIndexEntries misses an entry its shard does not hold");
  if (!even.ok() && (even.error().code != pb::ErrorCode::InvalidConfig || even.error().tensor != first_odd))
    Fail("CheckIndexEntries does not name the first entry a shard does not hold", even.error().message);

  pb::merge::MergePlan plan;
  for (const auto& n : shard_names) plan.shards.push_back({n, {}, {}});
  std::vector<std::pair<std::string, std::string>> added;  // tensor -> shard, in plan order
  if (parts.size() > 1) {
    std::string_view lines = parts[1];
    for (size_t k = 0; !lines.empty() && k < 16; ++k) {
      size_t nl = lines.find('\n');
      std::string name(lines.substr(0, nl));
      lines = nl == std::string_view::npos ? std::string_view() : lines.substr(nl + 1);
      // A plan's tensor names come from validated safetensors headers: always UTF-8 (the writer escapes, and a
      // name that is not UTF-8 could not come back as the same bytes).
      if (!pb::IsValidUtf8(name)) continue;
      // A name the index maps stays in its shard, as in a real plan (the index check holds every entry to the
      // shard that has it); only new names go round the shards. Moving an entry could empty a shard, and the
      // output index would then rightly name fewer shards (a harness bug once reported that: docs/fuzzing.md).
      auto& shard = weight_map.contains(name) && weight_map[name].is_string()
                        ? plan.shards[std::lower_bound(shard_names.begin(), shard_names.end(),
                                                       weight_map[name].get<std::string>()) -
                                      shard_names.begin()]
                        : plan.shards[k % plan.shards.size()];
      pb::merge::PlannedTensor t;
      t.name = name;
      t.op = pb::merge::TensorOp::kAdd;
      shard.tensors.push_back(t);
      added.emplace_back(name, shard.name);
    }
  }
  if (parts.size() > 2) std::memcpy(&plan.total_tensor_bytes, parts[2].data(), std::min<size_t>(8, parts[2].size()));
  // OutputIndexJson maps shard by shard: for a name added twice, the later shard in plan order wins. (A map,
  // not a scan of the plan per entry: an index of 50,000 shards would make the harness itself quadratic.)
  std::unordered_map<std::string, std::string> mapped;
  for (const auto& shard : plan.shards)
    for (const auto& t : shard.tensors) mapped[t.name] = shard.name;
  auto want_shard = [&](const std::string& tensor) -> std::optional<std::string> {
    auto it = mapped.find(tensor);
    if (it == mapped.end()) return std::nullopt;
    return it->second;
  };

  const std::string out = pb::merge::OutputIndexJson(model_index, plan);
  if (out.empty() || out.back() != '\n') Fail("the output index does not end in a newline", out);
  auto j = pb::ParseJson(out, "output index");
  if (!j.ok() || !j->is_object()) Fail("the output index is not a JSON object", out);
  const pb::Json& total = j.value()["metadata"]["total_size"];
  if (!total.is_number_unsigned() || total.get<uint64_t>() != plan.total_tensor_bytes)
    Fail("metadata.total_size is not the plan's total", out);
  const pb::Json& out_map = j.value()["weight_map"];
  for (const auto& [tensor, shard] : added) {
    const pb::Json& got = out_map.contains(tensor) ? out_map[tensor] : pb::Json();
    if (!got.is_string() || got.get<std::string>() != *want_shard(tensor))
      Fail("an added tensor is not mapped to its shard", tensor);
  }
  for (const auto& [tensor, file] : weight_map.items()) {
    if (want_shard(tensor)) continue;
    if (!out_map.contains(tensor) || out_map[tensor] != file) Fail("an input entry was lost or changed", tensor);
  }
  auto again = pb::merge::ParseModelIndex(out);
  if (!again.ok()) Fail("the output index is rejected: " + again.error().message, out);
  if (again->shard_names != shard_names) Fail("the output index names other shards", out);
  if (pb::merge::OutputIndexJson(again.value(), plan) != out) Fail("the output index is not a fixed point", out);
  return 0;
}
