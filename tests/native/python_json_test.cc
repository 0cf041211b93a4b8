// DumpPythonJson / PythonFloatRepr against text that CPython 3.11's json.dumps wrote (vectors pasted in,
// so the tests need no Python), plus the adapter_config.json files PEFT itself saved.
#include "text/python_json.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "test_util.h"

namespace pb::text {
namespace {


Json Parse(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j;
}

std::string OneLine(const Json& j, bool sort_keys = true) { return DumpPythonJson(j, {-1, sort_keys}); }

double FromBits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

TEST(PythonFloatRepr, MatchesPythonRepr) {
  struct Case {
    double value;
    const char* repr;
  };
  const Case cases[] = {
      // Scientific below 1e-4, positional from 1e-4.
      {1e-05, "1e-05"},
      {5e-05, "5e-05"},
      {1.5e-07, "1.5e-07"},
      {0.0001, "0.0001"},
      {0.00012345, "0.00012345"},
      // Positional below 1e16, scientific from 1e16.
      {9999999999999998.0, "9999999999999998.0"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {123456789012345.0, "123456789012345.0"},
      {1234567890123456.7, "1234567890123456.8"},
      {1.2345e20, "1.2345e+20"},
      {1e21, "1e+21"},
      {1e22, "1e+22"},
      {12345678901234567890.0, "1.2345678901234567e+19"},
      {1e100, "1e+100"},
      {1e-100, "1e-100"},
      // Extremes: smallest subnormal, smallest normal, largest finite.
      {5e-324, "5e-324"},
      {2.2250738585072014e-308, "2.2250738585072014e-308"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      // Shortest round trip, never more digits than needed.
      {0.1, "0.1"},
      {0.3, "0.3"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1.0 / 3, "0.3333333333333333"},
      {2.0 / 3, "0.6666666666666666"},
      {123.456, "123.456"},
      {-123.456, "-123.456"},
      {3.14159, "3.14159"},
      // Integral values keep ".0"; zero keeps its sign.
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {16.0, "16.0"},
      {100.0, "100.0"},
      {0.5, "0.5"},
      {-2.5, "-2.5"},
      // Powers of two, where the gap below is half the gap above: the shortest decimal lies above the
      // value although a longer one below is nearer (a nearest-only search prints 5.9604644775390625e-08).
      {std::ldexp(1.0, -24), "5.960464477539063e-08"},
      {std::ldexp(1.0, -44), "5.684341886080802e-14"},
      {std::ldexp(1.0, 89), "6.189700196426902e+26"},
      {FromBits(0x0060000000000000), "7.120236347223045e-307"},
  };
  for (const Case& c : cases) EXPECT_EQ(PythonFloatRepr(c.value), c.repr) << c.repr;
}

TEST(PythonFloatRepr, NonFiniteAsJsonDumpsWritesThem) {
  EXPECT_EQ(PythonFloatRepr(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(PythonFloatRepr(std::numeric_limits<double>::infinity()), "Infinity");
  EXPECT_EQ(PythonFloatRepr(-std::numeric_limits<double>::infinity()), "-Infinity");
  EXPECT_EQ(DumpPythonJson(Json::array({std::nan(""), -HUGE_VAL})), "[\n  NaN,\n  -Infinity\n]");
}

// The significant digits of a decimal text: no sign, point, exponent, leading or trailing zeros.
std::string SignificantDigits(const std::string& text) {
  std::string digits;
  for (char c : text.substr(0, text.find('e')))
    if (c >= '0' && c <= '9' && !(digits.empty() && c == '0')) digits.push_back(c);
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return digits;
}

TEST(PythonFloatRepr, RandomDoublesRoundTripWithShortestDigits) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 4000; ++i) {  // random bits: mostly 17 digits, the slowest case
    const double v = FromBits(rng());
    if (!std::isfinite(v)) continue;
    const std::string repr = PythonFloatRepr(v);
    ASSERT_EQ(std::strtod(repr.c_str(), nullptr), v) << repr;
#if defined(__cpp_lib_to_chars)  // native builds: same digits as the standard's shortest form
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    ASSERT_EQ(SignificantDigits(repr), SignificantDigits(std::string(buf, r.ptr))) << repr;
#endif
  }
}

TEST(DumpPythonJson, IntegersBooleansAndNull) {
  Json j = Json::array({std::numeric_limits<uint64_t>::max(), std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), 0, -1, true, false, nullptr});
  EXPECT_EQ(OneLine(j), "[18446744073709551615, -9223372036854775808, 9223372036854775807, 0, -1, true, false, null]");
  // Integers stay integers and floats stay floats, as Python's json.loads keeps them apart.
  EXPECT_EQ(OneLine(Parse("[16, 16.0, 1e5, -0, -0.0, 18446744073709551615]")),
            "[16, 16.0, 100000.0, 0, -0.0, 18446744073709551615]");
  EXPECT_EQ(DumpPythonJson(Json(7)), "7");
  EXPECT_EQ(DumpPythonJson(Json(nullptr)), "null");
  EXPECT_EQ(DumpPythonJson(Json::binary({1, 2})), "null");  // Python has no binary JSON values
}

const char kDoc[] = R"({"b":[1,{"y":null,"x":true}],"a":{},"c":[],"d":{"z":-1,"e":[0.5,"s",false,[]]}})";

TEST(DumpPythonJson, IndentTwoSorted) {
  EXPECT_EQ(DumpPythonJson(Parse(kDoc)),
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    {\n      \"x\": true,\n      \"y\": null\n    }\n  ],\n"
            "  \"c\": [],\n  \"d\": {\n    \"e\": [\n      0.5,\n      \"s\",\n      false,\n      []\n    ],\n"
            "    \"z\": -1\n  }\n}");
}

TEST(DumpPythonJson, IndentNoneIsOneLine) {
  EXPECT_EQ(OneLine(Parse(kDoc)),
            R"({"a": {}, "b": [1, {"x": true, "y": null}], "c": [], "d": {"e": [0.5, "s", false, []], "z": -1}})");
  EXPECT_EQ(OneLine(Parse(kDoc), false),
            R"({"b": [1, {"y": null, "x": true}], "a": {}, "c": [], "d": {"z": -1, "e": [0.5, "s", false, []]}})");
}

TEST(DumpPythonJson, IndentZeroStillBreaksLines) {
  EXPECT_EQ(DumpPythonJson(Parse(kDoc), {0, true}),
            "{\n\"a\": {},\n\"b\": [\n1,\n{\n\"x\": true,\n\"y\": null\n}\n],\n\"c\": [],\n\"d\": {\n\"e\": [\n0.5,\n"
            "\"s\",\nfalse,\n[]\n],\n\"z\": -1\n}\n}");
}

TEST(DumpPythonJson, IndentFourKeepsDocumentOrderWithoutSortKeys) {
  EXPECT_EQ(DumpPythonJson(Parse(kDoc), {4, false}),
            "{\n    \"b\": [\n        1,\n        {\n            \"y\": null,\n            \"x\": true\n        }\n"
            "    ],\n    \"a\": {},\n    \"c\": [],\n    \"d\": {\n        \"z\": -1,\n        \"e\": [\n"
            "            0.5,\n            \"s\",\n            false,\n            []\n        ]\n    }\n}");
}

TEST(DumpPythonJson, EmptyContainersHaveNothingInside) {
  EXPECT_EQ(DumpPythonJson(Json::object()), "{}");
  EXPECT_EQ(DumpPythonJson(Json::array()), "[]");
  EXPECT_EQ(DumpPythonJson(Parse(R"([{},[],{"a":{}}])")), "[\n  {},\n  [],\n  {\n    \"a\": {}\n  }\n]");
  EXPECT_EQ(OneLine(Parse(R"([{},[],{"a":{}}])")), R"([{}, [], {"a": {}}])");
}

TEST(DumpPythonJson, StringsUseEnsureAsciiEscapes) {
  // q"b\/ LF CR TAB BS FF NUL 0x01 0x1F space ~ DEL U+0080 é U+2028 U+FFFF 😀 U+10FFFF
  const std::string s = "q\"b\\/\n\r\t\b\f" + std::string(1, '\0') +
                        "\x01\x1f ~\x7f\xC2\x80\xC3\xA9\xE2\x80\xA8\xEF\xBF\xBF\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF";
  EXPECT_EQ(DumpPythonJson(Json(s)),
            R"("q\"b\\/\n\r\t\b\f\u0000\u0001\u001f ~\u007f\u0080\u00e9\u2028\uffff\ud83d\ude00\udbff\udfff")");
  // Keys are escaped the same way.
  EXPECT_EQ(DumpPythonJson(Parse("{\"\xC3\xA9\\n\":[\"\xF0\x9F\x98\x80\"]}")),
            "{\n  \"\\u00e9\\n\": [\n    \"\\ud83d\\ude00\"\n  ]\n}");
}

TEST(DumpPythonJson, InvalidUtf8BecomesReplacementCharacters) {
  // Only reachable for values built in C++ (the parser rejects such text): each bad byte is U+FFFD.
  EXPECT_EQ(DumpPythonJson(Json(std::string("a\xFF"
                                            "b\xC3"))),
            R"("a\ufffdb\ufffd")");
  EXPECT_EQ(DumpPythonJson(Json(std::string("\xC0\xAF"))), R"("\ufffd\ufffd")");            // overlong '/'
  EXPECT_EQ(DumpPythonJson(Json(std::string("\xED\xA0\x80"))), R"("\ufffd\ufffd\ufffd")");  // surrogate
}

TEST(DumpPythonJson, KeysSortByCodePoint) {
  // Keys in this order: b a é z 😀 U+FFFF A _ aa "" "a b" ÿ Ā Z, each mapped to its position.
  Json j = Parse("{\"b\":0,\"a\":1,\"\xC3\xA9\":2,\"z\":3,\"\xF0\x9F\x98\x80\":4,\"\xEF\xBF\xBF\":5,\"A\":6,\"_\":7,"
                 "\"aa\":8,\"\":9,\"a b\":10,\"\xC3\xBF\":11,\"\xC4\x80\":12,\"Z\":13}");
  EXPECT_EQ(OneLine(j), R"({"": 9, "A": 6, "Z": 13, "_": 7, "a": 1, "a b": 10, "aa": 8, "b": 0, "z": 3, "\u00e9": 2, )"
                        R"("\u00ff": 11, "\u0100": 12, "\uffff": 5, "\ud83d\ude00": 4})");
}

// A config PEFT saved (json.dumps(indent=2, sort_keys=True), no trailing newline) re-exports unchanged,
// also when the keys arrive in another order.
void ExpectFixtureRoundTrips(const std::string& name) {
  auto dir = pb::testing::FixturesDir();
  if (!dir || !std::filesystem::exists(*dir / name / "adapter_config.json"))
    PB_SKIP_WITHOUT_FIXTURE() << "no fixture " << name;
  auto bytes = pb::testing::ReadAll(*dir / name / "adapter_config.json");
  const std::string text(bytes.begin(), bytes.end());
  ASSERT_FALSE(text.empty());
  ASSERT_NE(text.back(), '\n');
  Json j = Parse(text);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(DumpPythonJson(j), text);

  Json reversed = Json::object();
  for (auto it = j.end(); it != j.begin();) {
    --it;
    reversed[it.key()] = *it;
  }
  ASSERT_NE(reversed.begin().key(), j.begin().key());
  EXPECT_EQ(DumpPythonJson(reversed), text);
}

TEST(DumpPythonJson, PeftGpt2AdapterConfigIsByteIdentical) { ExpectFixtureRoundTrips("peft-gpt2-seqcls-cattn-cproj"); }

TEST(DumpPythonJson, PeftRobertaAdapterConfigIsByteIdentical) {
  ExpectFixtureRoundTrips("peft-roberta-seqcls-query-value");
}

}  // namespace
}  // namespace pb::text
