// Accept/reject vectors for the reader, built from the reference's rules (docs/format.md, "Reading") and its own
// unit tests (huggingface/safetensors, safetensors/src/tensor.rs, `mod tests`). Each vector runs through three
// paths that must agree: the whole-buffer parser, the push parser fed byte by byte, and the push parser told the
// total size up front.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "core/header.h"
#include "test_util.h"

namespace pb::testing {
namespace {

struct Vector {
  const char* label;
  Bytes file;
  std::optional<ErrorCode> expected;  // nullopt: accepted
};

Bytes Zeros(size_t n) { return Bytes(n, 0); }
const std::string kI32 = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";

std::vector<Vector> Vectors() {
  using E = ErrorCode;
  std::vector<Vector> v;
  // Length prefix.
  v.push_back({"empty buffer", {}, E::HeaderTooSmall});
  v.push_back({"7 bytes", Bytes(7, 0), E::HeaderTooSmall});
  v.push_back({"huge N", {0x3C, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF}, E::HeaderTooLarge});
  v.push_back({"N = 1e8 + 1", MakeFile("", {}, 100'000'001), E::HeaderTooLarge});
  v.push_back({"N = 1e8 accepted, then too short", MakeFile("", {}, 100'000'000), E::InvalidHeaderLength});
  v.push_back({"prefix only", {0x3C, 0, 0, 0, 0, 0, 0, 0}, E::InvalidHeaderLength});
  v.push_back({"header truncated", MakeFile(kI32.substr(0, 30), {}, kI32.size()), E::InvalidHeaderLength});
  // UTF-8.
  v.push_back({"non-UTF-8 byte", MakeFile("\xFF"), E::InvalidHeader});
  v.push_back({"overlong encoding", MakeFile("{\"\xC0\xAF\":1}"), E::InvalidHeader});
  v.push_back({"encoded surrogate", MakeFile("{\"\xED\xA0\x80\":1}"), E::InvalidHeader});
  // JSON syntax and schema.
  v.push_back({"N = 0", MakeFile(""), E::InvalidHeaderDeserialization});
  v.push_back({"lone brace", MakeFile("{"), E::InvalidHeaderDeserialization});
  v.push_back({"top-level array", MakeFile("[]"), E::InvalidHeaderDeserialization});
  v.push_back({"BOM", MakeFile("\xEF\xBB\xBF{}"), E::InvalidHeaderDeserialization});
  v.push_back({"trailing NUL", MakeFile(std::string("{}\0", 3)), E::InvalidHeaderDeserialization});
  v.push_back({"trailing garbage", MakeFile("{}x"), E::InvalidHeaderDeserialization});
  v.push_back({"whitespace padded", MakeFile("{}\r \t\n"), std::nullopt});
  v.push_back({"leading whitespace", MakeFile("\t\n{}\r "), std::nullopt});
  v.push_back({"empty object", MakeFile("{}        "), std::nullopt});
  v.push_back({"unknown dtype", MakeFile(R"({"a":{"dtype":"E8M0","shape":[1],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"lowercase dtype", MakeFile(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", Zeros(4)),
               E::InvalidHeaderDeserialization});
  v.push_back({"negative dim", MakeFile(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"-0 dim", MakeFile(R"({"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}})"),
               E::InvalidHeaderDeserialization});
  v.push_back({"leading zero", MakeFile(R"({"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"float dim", MakeFile(R"({"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"exponent dim", MakeFile(R"({"a":{"dtype":"U8","shape":[1E0],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"quoted dim", MakeFile(R"({"a":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"dim > u64",
               MakeFile(R"({"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  // The largest u64 (20 digits, checked digit by digit) and the largest 19-digit number (read unchecked) parse;
  // their element counts then overflow in validation.
  v.push_back({"dim = u64 max",
               MakeFile(R"({"a":{"dtype":"U16","shape":[18446744073709551615],"data_offsets":[0,1]}})", Zeros(1)),
               E::ValidationOverflow});
  v.push_back({"dim of 19 nines",
               MakeFile(R"({"a":{"dtype":"U16","shape":[9999999999999999999],"data_offsets":[0,1]}})", Zeros(1)),
               E::ValidationOverflow});
  v.push_back({"dim > u64 by 10x",
               MakeFile(R"({"a":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"three offsets", MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"missing shape", MakeFile(R"({"a":{"dtype":"U8","data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"missing dtype", MakeFile(R"({"a":{"shape":[1],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"missing offsets", MakeFile(R"({"a":{"dtype":"U8","shape":[1]}})"), E::InvalidHeaderDeserialization});
  v.push_back(
      {"extra field ignored",
       MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":{"y":[1,2.5e3,null,true]}}})", Zeros(1)),
       std::nullopt});
  v.push_back({"extra field malformed",
               MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":01}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"repeated field",
               MakeFile(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"metadata null", MakeFile(R"({"__metadata__":null})"), std::nullopt});
  v.push_back({"metadata empty", MakeFile(R"({"__metadata__":{}})"), std::nullopt});
  v.push_back({"metadata number value", MakeFile(R"({"__metadata__":{"a":1}})"), E::InvalidHeaderDeserialization});
  v.push_back({"metadata nested", MakeFile(R"({"__metadata__":{"a":{}}})"), E::InvalidHeaderDeserialization});
  v.push_back(
      {"metadata twice", MakeFile(R"({"__metadata__":{},"__metadata__":{}})"), E::InvalidHeaderDeserialization});
  v.push_back({"metadata key twice (project decision)", MakeFile(R"({"__metadata__":{"a":"1","a":"2"}})"),
               E::InvalidHeaderDeserialization});
  v.push_back({"tensor named __metadata__",
               MakeFile(R"({"__metadata__":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back(
      {"tensor name twice (project decision)",
       MakeFile(
           R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
           Zeros(2)),
       E::InvalidHeaderDeserialization});
  v.push_back({"metadata anywhere",
               MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"__metadata__":{"k":"v"}})", Zeros(1)),
               std::nullopt});
  v.push_back({"raw control char in name",
               MakeFile("{\"a\x01\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"raw DEL in name",
               MakeFile("{\"a\x7F\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", Zeros(1)),
               std::nullopt});
  v.push_back({"escaped NUL in name",
               MakeFile(R"({"a\u0000":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", Zeros(1)), std::nullopt});
  v.push_back({"lone surrogate escape",
               MakeFile(R"({"a\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", Zeros(1)),
               E::InvalidHeaderDeserialization});
  v.push_back({"surrogate pair escape",
               MakeFile(R"({"a\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", Zeros(1)),
               std::nullopt});
  v.push_back(
      {"empty name", MakeFile(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", Zeros(1)), std::nullopt});
  v.push_back({"deep nesting",
               MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":)" + std::string(200, '[') +
                            std::string(200, ']') + "}}",
                        Zeros(1)),
               E::InvalidHeaderDeserialization});
  // serde_json's limits on what it buffers: 127 nested containers in all, numbers within double range.
  auto nested = [](int n) {
    return MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":)" + std::string(n, '[') +
                        std::string(n, ']') + "}}",
                    Zeros(1));
  };
  v.push_back({"125 nested in a field (127 in all)", nested(125), std::nullopt});
  v.push_back({"126 nested in a field (128 in all)", nested(126), E::InvalidHeaderDeserialization});
  auto field = [](const std::string& value) {
    return MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":)" + value + "}}", Zeros(1));
  };
  v.push_back({"float out of range", field("1e400"), E::InvalidHeaderDeserialization});
  v.push_back({"negative float out of range", field("-1.5e309"), E::InvalidHeaderDeserialization});
  v.push_back({"float underflow is zero", field("1e-400"), std::nullopt});
  v.push_back({"integer beyond 64 bits as a double", field(std::string(30, '9')), std::nullopt});
  v.push_back({"integer beyond double range", field(std::string(400, '9')), E::InvalidHeaderDeserialization});
  v.push_back({"70,000 dimensions",
               [] {
                 std::string shape;
                 for (int i = 0; i < 70000; ++i) shape += i ? ",1" : "1";
                 return MakeFile(R"({"a":{"dtype":"U8","shape":[)" + shape + R"(],"data_offsets":[0,1]}})", Zeros(1));
               }(),
               std::nullopt});
  v.push_back({"data larger than any file",
               [] {
                 std::string j = "{";
                 const uint64_t n = (1ull << 61) - 1;
                 for (uint64_t k = 0; k < 8; ++k)
                   j += std::string(k ? "," : "") + "\"t" + std::to_string(k) + R"(":{"dtype":"U8","shape":[)" +
                        std::to_string(n) + R"(],"data_offsets":[)" + std::to_string(k * n) + "," +
                        std::to_string((k + 1) * n) + "]}";
                 return MakeFile(j + "}");
               }(),
               E::MetadataIncompleteBuffer});
  // Offsets and sizes (checked in data order).
  v.push_back({"valid I32", MakeFile(kI32, Zeros(16)), std::nullopt});
  v.push_back(
      {"scalar", MakeFile(R"({"test":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})", Zeros(4)), std::nullopt});
  v.push_back(
      {"zero-size tensor", MakeFile(R"({"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]}})"), std::nullopt});
  v.push_back({"wrong size", MakeFile(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}})"),
               E::TensorInvalidInfo});
  v.push_back(
      {"overflow 2 x (2^64-2)",
       MakeFile(R"({"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}})", Zeros(16)),
       E::ValidationOverflow});
  v.push_back({"overflow bits",
               MakeFile(R"({"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}})", Zeros(16)),
               E::ValidationOverflow});
  v.push_back({"zero first avoids overflow",
               MakeFile(R"({"t":{"dtype":"U8","shape":[0,18446744073709551615],"data_offsets":[0,0]}})"),
               std::nullopt});
  v.push_back({"overflow before zero",
               MakeFile(R"({"t":{"dtype":"U8","shape":[18446744073709551615,2,0],"data_offsets":[0,0]}})"),
               E::ValidationOverflow});
  v.push_back({"U8 2^64-1 overflows in bits",
               MakeFile(R"({"t":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})"),
               E::ValidationOverflow});
  v.push_back({"F4 odd count", MakeFile(R"({"t":{"dtype":"F4","shape":[1,3],"data_offsets":[0,2]}})", Zeros(2)),
               E::MisalignedSlice});
  v.push_back({"F4 even count", MakeFile(R"({"t":{"dtype":"F4","shape":[1,2],"data_offsets":[0,1]}})", Zeros(1)),
               std::nullopt});
  v.push_back(
      {"F6 x4", MakeFile(R"({"t":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}})", Zeros(3)), std::nullopt});
  v.push_back({"F6 x2", MakeFile(R"({"t":{"dtype":"F6_E3M2","shape":[2],"data_offsets":[0,2]}})", Zeros(2)),
               E::MisalignedSlice});
  v.push_back({"hole at start", MakeFile(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", Zeros(2)),
               E::InvalidOffset});
  v.push_back(
      {"hole between",
       MakeFile(
           R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
           Zeros(3)),
       E::InvalidOffset});
  v.push_back(
      {"overlap",
       MakeFile(
           R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
           Zeros(3)),
       E::InvalidOffset});
  v.push_back(
      {"end before begin",
       MakeFile(
           R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"c":{"dtype":"U8","shape":[0],"data_offsets":[1,0]}})",
           Zeros(1)),
       E::InvalidOffset});
  v.push_back(
      {"identical offsets",
       MakeFile(
           R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
           Zeros(1)),
       E::InvalidOffset});
  v.push_back(
      {"several zero-size at one offset",
       MakeFile(
           R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[1,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"c":{"dtype":"F32","shape":[0],"data_offsets":[1,1]}})",
           Zeros(1)),
       std::nullopt});
  v.push_back(
      {"key order irrelevant",
       MakeFile(
           R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
           Zeros(2)),
       std::nullopt});
  // Coverage.
  v.push_back({"trailing bytes",
               [] {
                 Bytes f = MakeFile(kI32, Zeros(16));
                 std::string s = "extra_bogus_data_for_polyglot_file";
                 f.insert(f.end(), s.begin(), s.end());
                 return f;
               }(),
               E::MetadataIncompleteBuffer});
  v.push_back({"truncated data", MakeFile(kI32, Zeros(14)), E::MetadataIncompleteBuffer});
  v.push_back({"liar: 4 MiB declared, 1 byte given",
               MakeFile(R"({"liar":{"dtype":"F32","shape":[1024,1024],"data_offsets":[0,4194304]}})", Zeros(1)),
               E::MetadataIncompleteBuffer});
  v.push_back({"bad offset wins over trailing bytes",
               MakeFile(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", Zeros(9)), E::InvalidOffset});
  v.push_back({"json attack: 10 tensors at one offset",
               [] {
                 std::string j = "{";
                 for (int i = 0; i < 10; ++i)
                   j += std::string(i ? "," : "") + "\"weight_" + std::to_string(i) +
                        R"(":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
                 return MakeFile(j + "}", Zeros(16));
               }(),
               E::InvalidOffset});
  return v;
}

TEST(HeaderVectors, AllPathsAgreeWithTheReference) {
  for (const Vector& v : Vectors()) {
    SCOPED_TRACE(v.label);
    auto whole = ParseWholeFile(v.file);
    std::optional<ErrorCode> whole_code;
    if (!whole.ok()) whole_code = whole.error().code;
    EXPECT_EQ(whole_code, v.expected) << "whole-buffer: " << (whole.ok() ? "ok" : whole.error().message);

    // Push parser, one byte at a time (small vectors) or in one chunk (the 100 MB-N ones).
    std::vector<size_t> cuts;
    if (v.file.size() < 4096)
      for (size_t i = 1; i < v.file.size(); ++i) cuts.push_back(i);
    FeedOutcome bytewise = FeedSplit(v.file, cuts);
    EXPECT_EQ(bytewise.error, v.expected) << "byte-by-byte";
    FeedOutcome sized = FeedSplit(v.file, {}, ReaderOptions{v.file.size()});
    EXPECT_EQ(sized.error, v.expected) << "with total size";
    if (!v.expected) {
      EXPECT_EQ(bytewise.log.header_events, 1);
      EXPECT_TRUE(bytewise.log.in_order);
    }
  }
}

TEST(HeaderVectors, ErrorsNameTheTensorAndOffset) {
  auto r = ParseWholeFile(MakeFile(
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"bad":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
      Zeros(3)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::InvalidOffset);
  EXPECT_EQ(r.error().tensor, "bad");
  ASSERT_TRUE(r.error().offset.has_value());
  std::string json =
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"bad":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})";
  EXPECT_EQ(*r.error().offset, 8 + json.size() + 2);

  auto syntax = ParseWholeFile(MakeFile(R"({"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}})", Zeros(1)));
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.error().offset, 8u + std::string(R"({"a":{"dtype":"U8","shape":[)").size());

  auto dup = ParseWholeFile(MakeFile(
      R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
      Zeros(2)));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("duplicate tensor name `w`"), std::string::npos);
  EXPECT_EQ(dup.error().tensor, "w");
}

TEST(HeaderVectors, DecodesNamesMetadataAndOrder) {
  auto r = ParseWholeFile(MakeFile(
      R"({"b\"q\u00e9":{"dtype":"F16","shape":[1],"data_offsets":[4,6]},"__metadata__":{"format":"pt","k\n":"v\\"},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
      Zeros(6)));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Header& h = r.value();
  ASSERT_EQ(h.tensor_count(), 2u);
  EXPECT_EQ(h.tensor(0).name, "a");  // data order
  EXPECT_EQ(h.tensor(1).name, "b\"q\xC3\xA9");
  EXPECT_EQ(h.tensor(1).dtype, Dtype::F16);
  EXPECT_EQ(h.Find("b\"q\xC3\xA9"), 1u);
  EXPECT_EQ(h.Find("a"), 0u);
  EXPECT_FALSE(h.Find("c").has_value());
  ASSERT_TRUE(h.has_metadata());
  ASSERT_EQ(h.metadata().size(), 2u);
  EXPECT_EQ(h.metadata()[1].first, "k\n");
  EXPECT_EQ(h.metadata()[1].second, "v\\");
  EXPECT_EQ(h.data_size(), 6u);
}

TEST(HeaderVectors, RepeatedKeyChecksStayLinear) {
  // 200,000 metadata keys and 200,000 unknown fields: checking them for repeats must not be quadratic
  // (it once was: 100,000 keys took 12 s). Also a repeat at the very end is still found.
  std::string meta = R"({"__metadata__":{)";
  for (int i = 0; i < 200000; ++i) meta += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"\"";
  auto ok = ParseWholeFile(MakeFile(meta + "}}"));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->metadata().size(), 200000u);
  auto dup = ParseWholeFile(MakeFile(meta + R"(,"k7":""}})"));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("duplicate key `k7`"), std::string::npos);

  std::string fields = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1])";
  for (int i = 0; i < 200000; ++i) fields += ",\"f" + std::to_string(i) + "\":0";
  EXPECT_TRUE(ParseWholeFile(MakeFile(fields + "}}", Zeros(1))).ok());
  EXPECT_FALSE(ParseWholeFile(MakeFile(fields + R"(,"f3":0}})", Zeros(1))).ok());
}

TEST(HeaderVectors, DtypeTableMatchesTheReference) {
  const char* names[] = {"BOOL",    "F4",          "F6_E2M3",     "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
                         "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16",     "U16", "F16", "BF16",    "I32",
                         "U32",     "F32",         "C64",         "F64",     "I64", "U64"};
  const uint32_t bits[] = {8, 4, 6, 6, 8, 8, 8, 8, 8, 8, 8, 16, 16, 16, 16, 32, 32, 32, 64, 64, 64, 64};
  for (int i = 0; i < kDtypeCount; ++i) {
    auto d = ParseDtype(names[i]);
    ASSERT_TRUE(d.has_value()) << names[i];
    EXPECT_EQ(static_cast<int>(*d), i);
    EXPECT_EQ(DtypeName(*d), names[i]);
    EXPECT_EQ(DtypeBits(*d), bits[i]) << names[i];
  }
  EXPECT_FALSE(ParseDtype("E8M0").has_value());
  EXPECT_FALSE(ParseDtype("bf16").has_value());
}

}  // namespace
}  // namespace pb::testing
