// Whole-file dtype conversion: streaming (input order) and random access (reference order) must
// agree with each other, with the kernels, and must not depend on how the input is chunked.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "convert/convert_stream.h"
#include "kernels/convert.h"
#include "test_util.h"

namespace pb::testing {
namespace {

// A sink that lends small, odd-sized windows of its own buffer (the zero-copy path).
class LendingSink : public ByteSink {
 public:
  explicit LendingSink(size_t window) : window_(window) {}
  Status Write(std::span<const uint8_t> b) override {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return Status::Ok();
  }
  std::span<uint8_t> Lend(size_t max) override {
    lent_.assign(std::min(max, window_), 0xEE);
    return lent_;
  }
  Status Commit(size_t n) override {
    EXPECT_LE(n, lent_.size());
    bytes.insert(bytes.end(), lent_.begin(), lent_.begin() + n);
    ++commits;
    return Status::Ok();
  }
  Bytes bytes;
  int commits = 0;

 private:
  size_t window_;
  Bytes lent_;
};

Result<Bytes> ConvertStreaming(const Bytes& file, Dtype target, const std::vector<size_t>& cuts,
                               size_t lend_window = 0) {
  VectorSink plain;
  LendingSink lending(lend_window);
  ByteSink& sink = lend_window ? static_cast<ByteSink&>(lending) : plain;
  StreamingConverter conv(target, sink);
  size_t prev = 0;
  for (size_t c : cuts) {
    if (Status s = conv.Feed(std::span<const uint8_t>(file.data() + prev, c - prev)); !s.ok()) return s.error();
    prev = c;
  }
  if (Status s = conv.Feed(std::span<const uint8_t>(file.data() + prev, file.size() - prev)); !s.ok()) return s.error();
  if (Status s = conv.Finish(); !s.ok()) return s.error();
  if (lend_window >= 4) EXPECT_GT(lending.commits, 0);  // smaller windows cannot hold one element
  return lend_window ? lending.bytes : plain.bytes;
}

// What an edge with random access does: read each planned tensor's source range, in plan order.
Result<Bytes> ConvertRandomAccess(const Bytes& file, Dtype target, TensorOrder order, size_t chunk) {
  auto header = ParseWholeFile(file);
  if (!header.ok()) return header.error();
  auto plan = PlanConversion(header.value(), target, order);
  if (!plan.ok()) return plan.error();
  VectorSink sink;
  TensorBytesConverter conv(std::move(plan.value()), sink);
  if (Status s = conv.Begin(); !s.ok()) return s.error();
  for (size_t src : conv.plan().source_tensor) {
    TensorInfo t = header->tensor(src);
    for (uint64_t p = t.begin; p < t.end; p += chunk) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, t.end - p));
      if (Status s = conv.Push(std::span<const uint8_t>(file.data() + header->data_start() + p, n)); !s.ok())
        return s.error();
    }
  }
  if (Status s = conv.Finish(); !s.ok()) return s.error();
  return sink.bytes;
}

// A generated file with every convertible float dtype plus integer and sub-byte tensors.
Bytes MixedFile() {
  std::mt19937 rng(7);
  std::vector<std::pair<std::string, std::pair<std::string, size_t>>> tensors = {
      {"w.f64", {"F64", 37}},  {"w.f32", {"F32", 1001}},     {"w.bf16", {"BF16", 513}},
      {"w.f16", {"F16", 255}}, {"w.e4m3", {"F8_E4M3", 129}}, {"w.e5m2", {"F8_E5M2", 64}},
      {"ids", {"I64", 5}},     {"mask", {"BOOL", 3}},        {"q", {"F4", 6}},
      {"empty", {"F32", 0}}};
  std::string json = R"({"__metadata__":{"format":"pt"})";
  Bytes data;
  for (auto& [name, spec] : tensors) {
    uint32_t bits = DtypeBits(*ParseDtype(spec.first));
    size_t bytes = spec.second * bits / 8;
    json += ",\"" + name + R"(":{"dtype":")" + spec.first + R"(","shape":[)" + std::to_string(spec.second) +
            R"(],"data_offsets":[)" + std::to_string(data.size()) + "," + std::to_string(data.size() + bytes) + "]}";
    for (size_t i = 0; i < bytes; ++i) data.push_back(static_cast<uint8_t>(rng()));
    if (spec.first == "F32") {  // keep F32 values finite and in range so they are meaningful
      for (size_t i = 0; i < spec.second; ++i) {
        float f = static_cast<float>(static_cast<int>(rng() % 20001) - 10000) / 97.0f;
        std::memcpy(&data[data.size() - bytes + 4 * i], &f, 4);
      }
    }
  }
  json += "}";
  return MakeFile(json, data);
}

TEST(ConvertStream, StreamingAndRandomAccessAgreeInInputOrder) {
  Bytes file = MixedFile();
  for (Dtype target : {Dtype::BF16, Dtype::F16, Dtype::F32}) {
    auto streamed = ConvertStreaming(file, target, {});
    ASSERT_TRUE(streamed.ok()) << streamed.error().message;
    auto random = ConvertRandomAccess(file, target, TensorOrder::kInput, 7);
    ASSERT_TRUE(random.ok());
    EXPECT_EQ(streamed.value(), random.value());
    auto out = ParseWholeFile(streamed.value());
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->metadata().size(), 1u);
  }
}

TEST(ConvertStream, OutputDoesNotDependOnChunking) {
  Bytes file = MixedFile();
  auto expected = ConvertStreaming(file, Dtype::BF16, {});
  ASSERT_TRUE(expected.ok());
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    std::vector<size_t> cuts;
    for (size_t p = 1 + rng() % 13; p < file.size(); p += 1 + rng() % (round % 2 ? 5 : 400)) cuts.push_back(p);
    auto got = ConvertStreaming(file, Dtype::BF16, cuts);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got.value(), expected.value()) << "round " << round;
  }
}

TEST(ConvertStream, LendingSinksGetTheSameBytes) {
  Bytes file = MixedFile();
  for (Dtype target : {Dtype::BF16, Dtype::F16, Dtype::F32}) {
    auto expected = ConvertStreaming(file, target, {});
    ASSERT_TRUE(expected.ok());
    for (size_t window : {1, 2, 3, 7, 64, 4097}) {
      auto got = ConvertStreaming(file, target, {5, 100, 301, 302, 2000}, window);
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(got.value(), expected.value()) << "window " << window;
    }
  }
}

TEST(ConvertStream, ValuesMatchTheKernelsAndOthersAreCopied) {
  Bytes file = MixedFile();
  auto in = ParseWholeFile(file);
  auto out_bytes = ConvertStreaming(file, Dtype::F16, {});
  ASSERT_TRUE(out_bytes.ok());
  auto out = ParseWholeFile(out_bytes.value());
  ASSERT_TRUE(out.ok());
  for (size_t i = 0; i < in->tensor_count(); ++i) {
    TensorInfo src = in->tensor(i);
    auto j = out->Find(src.name);
    ASSERT_TRUE(j.has_value());
    TensorInfo dst = out->tensor(*j);
    const uint8_t* src_data = file.data() + in->data_start() + src.begin;
    const uint8_t* dst_data = out_bytes->data() + out->data_start() + dst.begin;
    if (IsConvertibleFloat(src.dtype)) {
      EXPECT_EQ(dst.dtype, Dtype::F16) << src.name;
      Bytes expect(dst.byte_length());
      ASSERT_TRUE(kernels::ConvertElements(src.dtype, Dtype::F16, src_data, expect.data(), src.element_count()));
      EXPECT_EQ(0, std::memcmp(expect.data(), dst_data, expect.size())) << src.name;
    } else {
      EXPECT_EQ(dst.dtype, src.dtype) << src.name;
      ASSERT_EQ(dst.byte_length(), src.byte_length());
      EXPECT_EQ(0, std::memcmp(src_data, dst_data, src.byte_length())) << src.name;
    }
  }
}

TEST(ConvertStream, ReferenceOrderToTheSameDtypeReproducesPythonFiles) {
  auto dir = FixturesDir();
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  for (const char* rel : {"peft-gpt2-seqcls-cattn-cproj/adapter_model.safetensors",
                          "peft-roberta-seqcls-query-value/adapter_model.safetensors"}) {
    Bytes file = ReadAll(*dir / rel);
    auto out = ConvertRandomAccess(file, Dtype::F32, TensorOrder::kReference, 1 << 16);
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(out.value() == file) << rel;
    // And the round trip F32 -> BF16 -> F32 changes only the low mantissa bits.
    auto bf16 = ConvertRandomAccess(file, Dtype::BF16, TensorOrder::kReference, 4096);
    ASSERT_TRUE(bf16.ok());
    EXPECT_LT(bf16->size(), file.size() * 6 / 10);
    auto back = ConvertRandomAccess(bf16.value(), Dtype::F32, TensorOrder::kReference, 4096);
    ASSERT_TRUE(back.ok());
    ASSERT_EQ(back->size(), file.size());
    auto h = ParseWholeFile(file);
    for (size_t k = h->data_start(); k + 4 <= file.size(); k += 4) {
      uint32_t a, b;
      std::memcpy(&a, &file[k], 4);
      std::memcpy(&b, &back.value()[k], 4);
      ASSERT_LE((a > b ? a - b : b - a) & 0xFFFF0000u, 0x00010000u) << rel << " at " << k;
      ASSERT_EQ(b & 0xFFFF, 0u);
    }
  }
}

TEST(ConvertStream, Errors) {
  Bytes file = MixedFile();
  auto bad_target = ConvertStreaming(file, Dtype::I32, {});
  ASSERT_FALSE(bad_target.ok());
  EXPECT_EQ(bad_target.error().code, ErrorCode::UnsupportedDtype);
  Bytes truncated(file.begin(), file.end() - 3);
  auto t = ConvertStreaming(truncated, Dtype::BF16, {});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::MetadataIncompleteBuffer);
  Bytes corrupt = file;
  corrupt[10] = 'X';
  EXPECT_EQ(ConvertStreaming(corrupt, Dtype::BF16, {}).error().code, ErrorCode::InvalidHeaderDeserialization);
}

}  // namespace
}  // namespace pb::testing
