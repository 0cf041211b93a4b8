// pb::Json (an insertion-ordered object with a hash index) and ParseJson (the one parse, with its limits).
#include "core/json.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>

#include "adapter/lora_config.h"
#include "text/python_json.h"
#include "merge/model_index.h"

namespace pb::testing {
namespace {

// Process CPU time: the machines that run the suite are shared, so wall time says little.
double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

std::string Keys(const Json& j) {
  std::string out;
  for (const auto& [k, v] : j.items()) out += k + ",";
  return out;
}

TEST(Json, ObjectsKeepInsertionOrderAndFindEveryKey) {
  // Past the size at which the object starts hashing (8), and across several table growths.
  Json j = Json::object();
  for (int i = 999; i >= 0; --i) j["k" + std::to_string(i)] = i;
  ASSERT_EQ(j.size(), 1000u);
  EXPECT_EQ(j.begin().key(), "k999");  // file order, not sorted
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(j.contains("k" + std::to_string(i))) << i;
    EXPECT_EQ(j["k" + std::to_string(i)], i);
  }
  EXPECT_FALSE(j.contains("k1000"));
  EXPECT_EQ(j.find("nope"), j.end());
  EXPECT_EQ(j.count("k5"), 1u);
}

TEST(Json, EraseKeepsOrderAndTheIndex) {
  for (int n : {5, 40}) {  // below and above the hashing threshold
    Json j = Json::object();
    for (int i = 0; i < n; ++i) j["k" + std::to_string(i)] = i;
    EXPECT_EQ(j.erase("k1"), 1u);
    EXPECT_EQ(j.erase("k1"), 0u);
    EXPECT_FALSE(j.contains("k1"));
    EXPECT_EQ(j.size(), static_cast<size_t>(n - 1));
    std::string expected;
    for (int i = 0; i < n; ++i)
      if (i != 1) expected += "k" + std::to_string(i) + ",";
    EXPECT_EQ(Keys(j), expected);
    for (int i = 2; i < n; ++i) EXPECT_EQ(j["k" + std::to_string(i)], i) << n;
    j["k1"] = -1;  // re-added at the end
    EXPECT_EQ(std::prev(j.end()).key(), "k1");
  }
}

TEST(Json, CopiesCompareAndStayIndexed) {
  Json a = Json::object();
  for (int i = 0; i < 50; ++i) a["k" + std::to_string(i)] = i;
  Json b = a;
  EXPECT_EQ(a, b);
  b["k49"] = 0;
  EXPECT_NE(a, b);
  b["new"] = 1;  // the copy's index is its own
  EXPECT_FALSE(a.contains("new"));
  EXPECT_TRUE(b.contains("new"));
  b.clear();
  EXPECT_TRUE(b.empty());
  b["x"] = 1;
  EXPECT_TRUE(b.contains("x"));
}

// What CPython 3.11 gives for the same text (json.loads then json.dumps):
//   {"b": 1, "a": 2, "b": 3, "c": {"x": 1, "x": [2]}}  ->  {"b": 3, "a": 2, "c": {"x": [2]}}
// a dict keeps the first position of a key and its last value. PEFT reads adapter_config.json this way.
TEST(Json, DuplicateKeysBehaveAsPythonsJson) {
  auto j = ParseJson(R"({"b": 1, "a": 2, "b": 3, "c": {"x": 1, "x": [2]}})", "t.json");
  ASSERT_TRUE(j.ok()) << j.error().message;
  EXPECT_EQ(text::DumpPythonJson(j.value(), {-1, false}), R"({"b": 3, "a": 2, "c": {"x": [2]}})");

  // So an adapter_config.json with `r` twice has PEFT's rank: the last one.
  auto c = adapter::ParseLoraConfig(R"({"peft_type": "LORA", "r": 4, "target_modules": ["q_proj"], "r": 16})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->r, 16);
}

TEST(ParseJson, RefusesDeepNestingBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const double t0 = CpuSeconds();
  auto r = ParseJson(deep, "model.safetensors.index.json");
  EXPECT_LT(CpuSeconds() - t0, 1.0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::InvalidConfig);
  EXPECT_EQ(r.error().message, "model.safetensors.index.json: nesting deeper than 128 levels at byte 128");

  EXPECT_TRUE(ParseJson(std::string(128, '[') + std::string(128, ']'), "x").ok());
  EXPECT_FALSE(ParseJson(std::string(129, '{'), "x").ok());
  // Brackets inside strings, escaped quotes included, are not containers.
  const std::string in_string = "[\"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\"]";
  EXPECT_TRUE(ParseJson(in_string, "x").ok());
}

TEST(ParseJson, SyntaxErrorsSayWhereAndDoNotEchoTheWholeInput) {
  auto r = ParseJson("{\"a\": 1,}", "adapter_config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::InvalidConfig);
  EXPECT_EQ(r.error().message.rfind("adapter_config.json: not valid JSON at byte 8: ", 0), 0u) << r.error().message;

  EXPECT_FALSE(ParseJson("", "x").ok());
  EXPECT_FALSE(ParseJson("{} x", "x").ok());
  EXPECT_FALSE(ParseJson("\"\xff\"", "x").ok());  // not UTF-8

  // A 10 MB unterminated string: nlohmann quotes what it read, the message keeps a few hundred bytes of it.
  const std::string huge = "{\"" + std::string(10 << 20, 'k');
  auto h = ParseJson(huge, "x");
  ASSERT_FALSE(h.ok());
  EXPECT_LT(h.error().message.size(), 1000u) << h.error().message.substr(0, 200);
}

TEST(ParseJson, RefusesDocumentsOverTheSizeLimit) {
  auto r = ParseJson("[1, 2, 3]", "config.json", {128, 8});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "config.json: 9 bytes, more than the 8 a JSON document may have");
  EXPECT_TRUE(ParseJson("[1, 2, 3]", "config.json", {128, 9}).ok());
}

TEST(ParseJson, ClipForMessageCutsAtCharacterBoundaries) {
  EXPECT_EQ(ClipForMessage("short"), "short");
  EXPECT_EQ(ClipForMessage(std::string(300, 'a'), 10), "aaaaaaaaaa\u2026 (300 bytes)");
  EXPECT_EQ(ClipForMessage("abc\xc3\xa9xyz", 4), "abc\u2026 (8 bytes)");  // é is not split
}

// An adapter_config.json with 100,000 keys (ordered_json: 15.6 s) and an index of 1,000,000 entries. The
// bounds are generous (shared machines); docs/benchmarks.md has the measured figures.
TEST(ParseJson, LargeObjectsParseInLinearTime) {
  std::string config = R"({"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"], "rank_pattern": {)";
  for (int i = 0; i < 100000; ++i) config += (i ? "," : "") + ("\"x" + std::to_string(i) + "\": 4");
  config += "}}";
  double t0 = CpuSeconds();
  auto doc = ParseJson(config, "adapter_config.json");
  const double config_seconds = CpuSeconds() - t0;
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc.value()["rank_pattern"].size(), 100000u);
  EXPECT_LT(config_seconds, 5.0);

  std::string index = R"({"metadata": {"total_size": 1}, "weight_map": {)";
  for (int i = 0; i < 1000000; ++i)
    index += (i ? ",\n" : "\n") +
             ("\"model.layers." + std::to_string(i / 1000) + ".mlp.experts." + std::to_string(i % 1000) +
              ".down_proj.weight\": \"model-" + std::to_string(i % 97) + ".safetensors\"");
  index += "}}";
  t0 = CpuSeconds();
  auto parsed = merge::ParseModelIndex(index);
  const double index_seconds = CpuSeconds() - t0;
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->shard_names.size(), 97u);
  EXPECT_LT(index_seconds, 10.0);
  std::printf("100k-key config: %.3f s CPU; 1M-entry index (%zu bytes): %.3f s CPU\n", config_seconds, index.size(),
              index_seconds);
}

}  // namespace
}  // namespace pb::testing
