// model.safetensors.index.json: the one reading and the one weight_map check that the native CLI and the WASM
// merge (npm CLI, mergeShards, inspectRepo) share.
#include "merge/model_index.h"

#include <gtest/gtest.h>

#include <string>

#include "core/header.h"

namespace pb::testing {
namespace {

std::string IndexError(const std::string& text) {
  auto r = merge::ParseModelIndex(text);
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.error().code, ErrorCode::InvalidConfig) << r.error().message;
  return r.error().message;
}

TEST(ModelIndex, ShardNamesAreDistinctAndSorted) {
  auto r = merge::ParseModelIndex(R"({"weight_map": {"b": "m-2.safetensors", "a": "m-1.safetensors",
                                                   "c": "m-2.safetensors"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->shard_names, (std::vector<std::string>{"m-1.safetensors", "m-2.safetensors"}));
}

TEST(ModelIndex, MalformedIndexesAreOnePreciseError) {
  EXPECT_EQ(IndexError(R"({"weight_map": {}})"),
            "model.safetensors.index.json: weight_map is empty: it names no shard");
  EXPECT_EQ(IndexError(R"({"metadata": {}})"), "model.safetensors.index.json: has no weight_map object");
  EXPECT_EQ(IndexError(R"([])"), "model.safetensors.index.json: has no weight_map object");
  EXPECT_EQ(IndexError(R"({"weight_map": []})"), "model.safetensors.index.json: has no weight_map object");
  EXPECT_EQ(IndexError(R"({"weight_map": {"t": 1}})"),
            "model.safetensors.index.json: weight_map[\"t\"] is not a string");
  EXPECT_EQ(IndexError(R"({"weight_map": {"t": "../x.safetensors"}})"),
            "model.safetensors.index.json: shard name `../x.safetensors` is not a plain .safetensors file name (no "
            "paths, no traversal)");
  EXPECT_EQ(IndexError("{\"weight_map\": {\"t\": \"a.safetensors\",}}")
                .rfind("model.safetensors.index.json: not valid JSON at byte ", 0),
            0u);
}

TEST(ModelIndex, DeepNestingAnywhereIsRefusedAtOnce) {
  const std::string deep = R"({"weight_map": {"t": "a.safetensors"}, "metadata": {"x": )" + std::string(100000, '[') +
                           std::string(100000, ']') + "}}";
  EXPECT_EQ(IndexError(deep), "model.safetensors.index.json: nesting deeper than 128 levels at byte 183");
}

TEST(ModelIndex, EchoedInputIsClipped) {
  const std::string key(10 << 20, 'k');
  const std::string message = IndexError(R"({"weight_map": {")" + key + R"(": 1}})");
  EXPECT_LT(message.size(), 400u);
  EXPECT_NE(message.find("(10485760 bytes)"), std::string::npos);
}

TEST(ModelIndex, EveryEntryMustBeInTheShardItNames) {
  auto index = merge::ParseModelIndex(R"({"weight_map": {"a": "one.safetensors", "b": "two.safetensors",
                                                        "c": "two.safetensors"}})");
  ASSERT_TRUE(index.ok());
  auto one = ParseHeader(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})");
  auto two = ParseHeader(R"({"b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})");
  ASSERT_TRUE(one.ok() && two.ok());

  Status missing = merge::CheckIndexAgainstShards(
      index.value(), {{"one.safetensors", &one.value()}, {"two.safetensors", &two.value()}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::InvalidConfig);
  EXPECT_EQ(missing.error().message,
            "1 tensor(s) of model.safetensors.index.json are not in the shard it names:\n  c (in two.safetensors)");

  Status not_given = merge::CheckIndexAgainstShards(index.value(), {{"one.safetensors", &one.value()}});
  ASSERT_FALSE(not_given.ok());
  EXPECT_EQ(not_given.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(not_given.error().message, "shard `two.safetensors` was not given");

  auto ok = merge::ParseModelIndex(R"({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}})");
  EXPECT_TRUE(
      merge::CheckIndexAgainstShards(ok.value(), {{"one.safetensors", &one.value()}, {"two.safetensors", &two.value()}})
          .ok());
}

}  // namespace
}  // namespace pb::testing
