// The streaming writer: exact bytes of the reference serializer, and re-serialization of real files.
#include <gtest/gtest.h>

#include <cstring>

#include "core/writer.h"
#include "test_util.h"

namespace pb::testing {
namespace {

Bytes Serialize(const std::vector<TensorSpec>& specs, const std::vector<Bytes>& data,
                const std::optional<Metadata>& metadata, TensorOrder order = TensorOrder::kReference) {
  auto plan = PlanWrite(specs, metadata, order);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  VectorSink sink;
  StreamingWriter writer(plan.value(), sink);
  EXPECT_TRUE(writer.Begin().ok());
  for (const PlannedTensor& p : writer.plan().tensors) EXPECT_TRUE(writer.Write(data[p.input_index]).ok());
  EXPECT_TRUE(writer.Finish().ok());
  return sink.bytes;
}

std::string HeaderText(const Bytes& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
  return std::string(file.begin() + 8, file.begin() + 8 + n);
}

Bytes F32Bytes(std::initializer_list<float> values) {
  Bytes out(values.size() * 4);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

TEST(Writer, EmptyFileIs16Bytes) {
  Bytes f = Serialize({}, {}, std::nullopt);
  Bytes expected = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
  EXPECT_EQ(f, expected);
}

TEST(Writer, EmptyWithMetadata) {
  Bytes f = Serialize({}, {}, Metadata{{"framework", "pt"}});
  EXPECT_EQ(f.size(), 48u);
  EXPECT_EQ(HeaderText(f), std::string(R"({"__metadata__":{"framework":"pt"}})") + "     ");
}

TEST(Writer, NoTensorsEmptyMetadataIsValidJson) {
  // The reference writes `{},"__metadata__":{}}` here (a bug); we write valid JSON.
  Bytes f = Serialize({}, {}, Metadata{});
  EXPECT_EQ(HeaderText(f), std::string(R"({"__metadata__":{}})") + "     ");
  auto parsed = ParseWholeFile(f);
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->has_metadata());
}

TEST(Writer, F32Attn0Is96BytesWithoutPadding) {
  Bytes f = Serialize({{"attn.0", Dtype::F32, {1, 2, 3}}}, {F32Bytes({0, 1, 2, 3, 4, 5})}, std::nullopt);
  ASSERT_EQ(f.size(), 96u);
  EXPECT_EQ(f[0], 64);
  EXPECT_EQ(HeaderText(f), R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})");
}

TEST(Writer, PaddingToEightWithSpaces) {
  Bytes f = Serialize({{"attn0", Dtype::F32, {1, 1, 2, 3}}}, {F32Bytes({0, 1, 2, 3, 4, 5})}, std::nullopt);
  EXPECT_EQ(f[0], 72);
  EXPECT_EQ(HeaderText(f).substr(65), std::string(7, ' '));
}

TEST(Writer, F4OneByte) {
  Bytes f = Serialize({{"attn.0", Dtype::F4, {1, 2}}}, {{0}}, std::nullopt);
  EXPECT_EQ(f.size(), 73u);
  EXPECT_EQ(f[0], 64);
}

TEST(Writer, ReferenceOrderDtypeDescendingThenName) {
  Bytes f = Serialize({{"test2", Dtype::F16, {2, 2}}, {"test1", Dtype::I32, {2, 2}}}, {Bytes(8, 2), Bytes(16, 1)},
                      std::nullopt);
  EXPECT_EQ(f[0], 128);
  EXPECT_EQ(
      HeaderText(f).substr(0, 122),
      R"({"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},"test2":{"dtype":"F16","shape":[2,2],"data_offsets":[16,24]}})");
  EXPECT_EQ(f[136], 1);  // I32 data first, at byte 136
  EXPECT_EQ(f[152], 2);

  // Full enum order, and names by bytes ("Z" < "b" < "z0").
  std::vector<TensorSpec> specs;
  std::vector<Bytes> data;
  for (int d = 0; d < kDtypeCount; ++d) {
    specs.push_back({"t" + std::to_string(d), static_cast<Dtype>(d), {8}});
    data.push_back(Bytes(8 * DtypeBits(static_cast<Dtype>(d)) / 8));
  }
  specs.push_back({"b", Dtype::U8, {1}});
  specs.push_back({"Z", Dtype::U8, {1}});
  specs.push_back({"z0", Dtype::U8, {1}});
  data.insert(data.end(), {Bytes(1), Bytes(1), Bytes(1)});
  auto plan = PlanWrite(specs, std::nullopt, TensorOrder::kReference);
  ASSERT_TRUE(plan.ok());
  std::vector<std::string> order;
  for (auto& p : plan->tensors) order.push_back(specs[p.input_index].name);
  std::vector<std::string> expected = {"t21", "t20", "t19", "t18", "t17", "t16", "t15", "t14", "t13",
                                       "t12", "t11", "t10", "t9",  "t8",  "t7",  "t6",  "t5",  "Z",
                                       "b",   "t4",  "z0",  "t3",  "t2",  "t1",  "t0"};
  EXPECT_EQ(order, expected);
}

TEST(Writer, InputOrderKeepsTheGivenOrder) {
  auto plan = PlanWrite({{"z", Dtype::U8, {1}}, {"a", Dtype::F64, {1}}}, std::nullopt, TensorOrder::kInput);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->tensors[0].input_index, 0u);
  EXPECT_EQ(plan->tensors[1].begin, 1u);
}

TEST(Writer, Bf16ExampleAndEscaping) {
  Bytes f =
      Serialize({{"test", Dtype::BF16, {2, 2}}}, {{0x10, 0x40, 0x80, 0x3F, 0x80, 0x3F, 0x80, 0x3F}}, std::nullopt);
  EXPECT_EQ(f[0], 64);
  std::string out;
  AppendJsonString(out, "esc\"\\/\n\t\x01\xC3\xA9\x7F");
  EXPECT_EQ(out, "\"esc\\\"\\\\/\\n\\t\\u0001\xC3\xA9\x7F\"");
}

TEST(Writer, RejectsBadSpecs) {
  EXPECT_EQ(PlanWrite({{"a", Dtype::U8, {1}}, {"a", Dtype::U8, {1}}}, std::nullopt, TensorOrder::kInput).error().code,
            ErrorCode::InvalidArgument);
  EXPECT_EQ(PlanWrite({{"__metadata__", Dtype::U8, {1}}}, std::nullopt, TensorOrder::kInput).error().code,
            ErrorCode::InvalidArgument);
  EXPECT_EQ(PlanWrite({{"a", Dtype::F4, {3}}}, std::nullopt, TensorOrder::kInput).error().code,
            ErrorCode::MisalignedSlice);
  EXPECT_EQ(PlanWrite({{"a", Dtype::U64, {1ull << 62}}}, std::nullopt, TensorOrder::kInput).error().code,
            ErrorCode::ValidationOverflow);
  EXPECT_EQ(PlanWrite({}, Metadata{{"a", std::string(100'000'000, 'x')}}, TensorOrder::kInput).error().code,
            ErrorCode::HeaderTooLarge);
}

TEST(Writer, WriteChecksByteCounts) {
  auto plan = PlanWrite({{"a", Dtype::U8, {4}}}, std::nullopt, TensorOrder::kInput);
  VectorSink sink;
  StreamingWriter w(plan.value(), sink);
  ASSERT_TRUE(w.Begin().ok());
  ASSERT_TRUE(w.Write(Bytes(3)).ok());
  EXPECT_EQ(w.Finish().error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(w.Write(Bytes(2)).error().code, ErrorCode::InvalidArgument);
  // Pass-through: each Write reaches the sink as it is, nothing is held back.
  EXPECT_EQ(sink.writes, 2);
}

TEST(Writer, ReportsTheCurrentTensor) {
  auto plan = PlanWrite({{"a", Dtype::U8, {3}}, {"z", Dtype::U8, {0}}, {"b", Dtype::F32, {1}}}, std::nullopt,
                        TensorOrder::kInput);
  VectorSink sink;
  StreamingWriter w(plan.value(), sink);
  ASSERT_TRUE(w.Begin().ok());
  EXPECT_EQ(w.current_tensor(), 0u);
  EXPECT_EQ(w.current_tensor_remaining(), 3u);
  ASSERT_TRUE(w.Write(Bytes(3)).ok());
  EXPECT_EQ(w.current_tensor(), 2u);  // the zero-size tensor needs nothing
  EXPECT_EQ(w.current_tensor_remaining(), 4u);
  ASSERT_TRUE(w.Write(Bytes(4)).ok());
  EXPECT_EQ(w.current_tensor(), 3u);
  EXPECT_EQ(w.current_tensor_remaining(), 0u);
}

// Files written by Python safetensors (metadata with at most one key) re-serialize to the same bytes.
TEST(Writer, ReserializingReferenceFilesGivesIdenticalBytes) {
  auto dir = FixturesDir();
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  const char* files[] = {
      "peft-gpt2-seqcls-cattn-cproj/adapter_model.safetensors",
      "peft-roberta-seqcls-query-value/adapter_model.safetensors",
      "safetensors-jl-dtypes/model.safetensors",
      "safetensors-jl-dtypes/model.numpy.safetensors",
      "safetensors-jl-sharded/model-00001-of-00006.safetensors",
      "safetensors-jl-sharded/model-00005-of-00006.safetensors",
      "diffusers-sd15-attnproc-lora/pytorch_lora_weights.safetensors",
      "burn-multi-layer/multi_layer.safetensors",
      "candle-i64/jfk-codes.safetensors",
      "r-safetensors-hello/hello.safetensors",
  };
  for (const char* rel : files) {
    SCOPED_TRACE(rel);
    Bytes file = ReadAll(*dir / rel);
    auto h = ParseWholeFile(file);
    ASSERT_TRUE(h.ok());
    std::vector<TensorSpec> specs;
    std::vector<Bytes> data;
    for (size_t i = 0; i < h->tensor_count(); ++i) {
      TensorInfo t = h->tensor(i);
      specs.push_back({std::string(t.name), t.dtype, {t.shape.begin(), t.shape.end()}});
      data.emplace_back(file.begin() + h->data_start() + t.begin, file.begin() + h->data_start() + t.end);
    }
    std::optional<Metadata> meta;
    if (h->has_metadata()) meta = h->metadata();
    Bytes out = Serialize(specs, data, meta);
    EXPECT_TRUE(out == file) << "re-serialized bytes differ";
  }
}

}  // namespace
}  // namespace pb::testing
