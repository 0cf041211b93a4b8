// core/utf8.h: the one strict UTF-8 decoder (DecodeUtf8) that validation and the Python-JSON writer share.
#include "core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace pb {
namespace {

TEST(Utf8, DecodeReadsOneCodePointAndMovesPastIt) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a, é, €, 😀
  size_t i = 0;
  EXPECT_EQ(DecodeUtf8(text, i), 0x61u);
  EXPECT_EQ(i, 1u);
  EXPECT_EQ(DecodeUtf8(text, i), 0xE9u);
  EXPECT_EQ(i, 3u);
  EXPECT_EQ(DecodeUtf8(text, i), 0x20ACu);
  EXPECT_EQ(i, 6u);
  EXPECT_EQ(DecodeUtf8(text, i), 0x1F600u);
  EXPECT_EQ(i, text.size());
}

TEST(Utf8, DecodeRefusesWhatRustRefusesAndLeavesThePlace) {
  for (const std::string bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xC3",
                                "\xE2\x82", "\xC3\x28", "\xFF"}) {
    size_t i = 0;
    EXPECT_FALSE(DecodeUtf8(bad, i)) << testing::PrintToString(bad);
    EXPECT_EQ(i, 0u);
    EXPECT_EQ(FirstInvalidUtf8("ok" + bad), 2u) << testing::PrintToString(bad);
  }
  EXPECT_EQ(FirstInvalidUtf8("plain ascii, then \xC3\xA9 and \xF0\x9F\x98\x80"), 29u);  // all valid: the size
}

}  // namespace
}  // namespace pb
