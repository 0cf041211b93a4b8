// The inspect renderings the two CLIs share: valid JSON that round-trips every name and number.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "app/report.h"
#include "test_util.h"

namespace pb::testing {
namespace {

TEST(Report, InspectJsonRoundTripsNamesMetadataAndSizes) {
  auto h = ParseWholeFile(MakeFile(
      R"({"__metadata__":{"q\"k":"tab\there","e":"\u00e9/\u007f"},"n\u0001\\\n":{"dtype":"F8_E4M3","shape":[2,3],"data_offsets":[0,6]},)"
      R"("big":{"dtype":"U8","shape":[0,18446744073709551615],"data_offsets":[6,6]},"s":{"dtype":"I64","shape":[],"data_offsets":[6,14]}})",
      Bytes(14)));
  ASSERT_TRUE(h.ok()) << h.error().message;
  auto j = nlohmann::json::parse(RenderInspectJson(h.value()));
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["dataSize"], 14);
  EXPECT_EQ(j["metadata"]["q\"k"], "tab\there");
  EXPECT_EQ(j["metadata"]["e"], "\xC3\xA9/\x7F");
  ASSERT_EQ(j["tensors"].size(), 3u);
  EXPECT_EQ(j["tensors"][0]["name"], std::string("n\x01\\\n"));
  EXPECT_EQ(j["tensors"][0]["dtype"], "F8_E4M3");
  EXPECT_EQ(j["tensors"][1]["shape"][1].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["tensors"][2]["shape"], nlohmann::json::array());
  EXPECT_EQ(j["tensors"][2]["byteLength"], 8);
  EXPECT_EQ(j["parameters"]["F8_E4M3"], 6);
  EXPECT_EQ(j["parameters"]["I64"], 1);
  EXPECT_EQ(j["totalParameters"], 7);

  std::string text = RenderInspectText(h.value());
  EXPECT_NE(text.find("  total: 7\n"), std::string::npos);
  // Control bytes never reach the terminal raw.
  EXPECT_NE(text.find("  n\\x01\\\\x0A"), std::string::npos) << text;
  EXPECT_NE(text.find("tab\\x09here"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x01'), std::string::npos);
  EXPECT_EQ(text.find('\t'), std::string::npos);
  EXPECT_NE(text.find("metadata:\n"), std::string::npos);
}

TEST(Report, ErrorJsonHasEveryField) {
  auto j = nlohmann::json::parse(RenderErrorJson(MakeError(ErrorCode::InvalidOffset, "bad \"x\"", "w", 42)));
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["error"]["code"], "InvalidOffset");
  EXPECT_EQ(j["error"]["message"], "bad \"x\"");
  EXPECT_EQ(j["error"]["tensor"], "w");
  EXPECT_EQ(j["error"]["offset"], 42);
  auto k = nlohmann::json::parse(RenderErrorJson(MakeError(ErrorCode::HeaderTooSmall, "short")));
  EXPECT_TRUE(k["error"]["tensor"].is_null());
  EXPECT_TRUE(k["error"]["offset"].is_null());
}

}  // namespace
}  // namespace pb::testing
