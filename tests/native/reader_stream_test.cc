// The push parser against real files from other tools: every fixture must inspect cleanly (or fail
// as PROVENANCE.md says), and feeding it split anywhere must give the same events.
#include <gtest/gtest.h>

#include <random>

#include "core/header.h"
#include "test_util.h"

namespace pb::testing {
namespace {

// Events of a whole-chunk feed, used as the expected value for every other split.
FeedOutcome Reference(const Bytes& file) { return FeedSplit(file, {}); }

void ExpectSame(const FeedOutcome& a, const FeedOutcome& b) {
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.log.header_events, b.log.header_events);
  EXPECT_EQ(a.log.tensors, b.log.tensors);
  EXPECT_EQ(a.log.data, b.log.data);
  EXPECT_TRUE(b.log.in_order);
}

bool IsKnownMalformed(const std::filesystem::path& p) {
  return p.filename() == "safetensors_abuse_attempt_1.safetensors";
}

TEST(ReaderFixtures, EveryFixtureInspectsOrFailsAsDocumented) {
  auto files = FixtureFiles();
  if (files.empty()) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    Bytes file = ReadAll(path);
    auto whole = ParseWholeFile(file);
    if (IsKnownMalformed(path)) {
      ASSERT_FALSE(whole.ok());
      EXPECT_EQ(whole.error().code, ErrorCode::InvalidHeaderLength);  // N = 1000 in an 88-byte file
      continue;
    }
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    EXPECT_EQ(whole->file_size(), file.size());
    FeedOutcome streamed = Reference(file);
    ASSERT_FALSE(streamed.error.has_value());
    // The spans, reassembled, are exactly the file's data region.
    Bytes data;
    for (const Bytes& t : streamed.log.data) data.insert(data.end(), t.begin(), t.end());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), file.begin() + whole->data_start()));
  }
}

TEST(ReaderFixtures, KnownHeadersFromProvenance) {
  auto dir = FixturesDir();
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  auto gpt2 = ParseWholeFile(ReadAll(*dir / "peft-gpt2-seqcls-cattn-cproj/adapter_model.safetensors"));
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ(gpt2->tensor_count(), 73u);
  EXPECT_EQ(gpt2->header_size(), 9160u);
  ASSERT_EQ(gpt2->metadata().size(), 1u);
  EXPECT_EQ(gpt2->metadata()[0], (std::pair<std::string, std::string>{"format", "pt"}));
  auto a = gpt2->Find("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(std::vector<uint64_t>(gpt2->tensor(*a).shape.begin(), gpt2->tensor(*a).shape.end()),
            (std::vector<uint64_t>{8, 768}));

  auto mlx = ParseWholeFile(ReadAll(*dir / "mlx-lm-qwen2.5-0.5b/adapters.safetensors"));
  ASSERT_TRUE(mlx.ok());
  EXPECT_EQ(mlx->header_size(), 1684u);  // not a multiple of 8: accepted
  EXPECT_FALSE(mlx->has_metadata());

  auto burn = ParseWholeFile(ReadAll(*dir / "burn-multi-layer/multi_layer.safetensors"));
  ASSERT_TRUE(burn.ok());
  auto nbt = burn->Find("norm1.num_batches_tracked");
  ASSERT_TRUE(nbt.has_value());
  EXPECT_TRUE(burn->tensor(*nbt).shape.empty());
  EXPECT_EQ(burn->tensor(*nbt).byte_length(), 8u);

  auto meta = ParseWholeFile(ReadAll(*dir / "safetensors-jl-dtypes/model.with_metadata.safetensors"));
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->tensor_count(), 36u);
  EXPECT_EQ(meta->metadata().size(), 2u);
}

TEST(ReaderProperty, SmallFixturesSplitAtEveryBytePosition) {
  auto files = FixtureFiles();
  if (files.empty()) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  int checked = 0;
  for (const auto& path : files) {
    Bytes file = ReadAll(path);
    if (file.size() > 20000) continue;
    SCOPED_TRACE(path.string());
    FeedOutcome expected = Reference(file);
    for (size_t cut = 0; cut <= file.size(); ++cut) ExpectSame(expected, FeedSplit(file, {cut}));
    // And two cuts around the header boundary region.
    for (size_t cut = 0; cut + 3 <= std::min<size_t>(file.size(), 300); ++cut)
      ExpectSame(expected, FeedSplit(file, {cut, cut + 3}));
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(ReaderProperty, LargerFixturesSplitAtSeededRandomCuts) {
  auto files = FixtureFiles();
  if (files.empty()) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  std::mt19937_64 rng(20261130);
  for (const auto& path : files) {
    Bytes file = ReadAll(path);
    if (file.size() <= 20000) continue;
    SCOPED_TRACE(path.string());
    FeedOutcome expected = Reference(file);
    ASSERT_FALSE(expected.error.has_value());
    for (int round = 0; round < 12; ++round) {
      std::vector<size_t> cuts;
      size_t pos = 0;
      // Mix tiny and large chunks.
      while (true) {
        size_t step = (rng() % 4 == 0) ? 1 + rng() % 7 : 1 + rng() % (round < 6 ? 4096 : 300000);
        pos += step;
        if (pos >= file.size()) break;
        cuts.push_back(pos);
      }
      ExpectSame(expected, FeedSplit(file, cuts));
    }
  }
}

TEST(ReaderProperty, GeneratedFilesWithZeroSizeAndSubByteTensors) {
  // Zero-size tensors, scalars, F4 and odd header lengths, split everywhere.
  std::string json =
      R"({"e0":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
      R"("e1":{"dtype":"U8","shape":[0],"data_offsets":[8,8]},"f4":{"dtype":"F4","shape":[2,3],"data_offsets":[8,11]},)"
      R"("b":{"dtype":"BOOL","shape":[5],"data_offsets":[11,16]},"e2":{"dtype":"I64","shape":[0],"data_offsets":[16,16]}} )";
  Bytes data(16);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  Bytes file = MakeFile(json, data);
  FeedOutcome expected = Reference(file);
  ASSERT_FALSE(expected.error.has_value());
  ASSERT_EQ(expected.log.tensors.size(), 6u);
  for (size_t a = 0; a <= file.size(); ++a)
    for (size_t b = a; b <= file.size(); b += 5) ExpectSame(expected, FeedSplit(file, {a, b}));
}

TEST(ReaderProperty, ErrorsAreStickyAndFinishChecksCoverage) {
  Bytes file = MakeFile(R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", Bytes(4, 1));
  EventLog log;
  StreamingReader reader;
  ASSERT_TRUE(reader.Feed(std::span<const uint8_t>(file.data(), file.size() - 1), log).ok());
  EXPECT_EQ(reader.bytes_until_header(), 0u);
  Status s = reader.Finish(log);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::MetadataIncompleteBuffer);
  EXPECT_EQ(s.error().tensor, "t");
  // Sticky: the same error again.
  Status again = reader.Feed(std::span<const uint8_t>(file.data(), 1), log);
  EXPECT_EQ(again.error().code, ErrorCode::MetadataIncompleteBuffer);

  // Trailing bytes are reported at the first extra byte, with its offset.
  Bytes longer = file;
  longer.push_back(0);
  StreamingReader r2;
  EventLog l2;
  Status t = r2.Feed(longer, l2);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::MetadataIncompleteBuffer);
  EXPECT_EQ(t.error().offset, file.size());
}

TEST(ReaderProperty, StreamingStopsBufferingAfterTheHeader) {
  // A header declaring 1 GiB of data: the reader reports the header, then passes spans through
  // without ever accumulating them (the test only ever holds one 1 MiB chunk).
  std::string json = R"({"big":{"dtype":"U8","shape":[1073741824],"data_offsets":[0,1073741824]}})";
  Bytes head = MakeFile(json);
  StreamingReader reader;
  struct Counter : ReaderEvents {
    uint64_t bytes = 0;
    Status OnHeader(const Header&) override { return Status::Ok(); }
    Status OnTensorData(size_t, uint64_t off, std::span<const uint8_t> b) override {
      EXPECT_EQ(off, bytes);
      bytes += b.size();
      return Status::Ok();
    }
  } counter;
  ASSERT_TRUE(reader.Feed(head, counter).ok());
  Bytes chunk(1 << 20, 0xAB);
  for (int i = 0; i < 1024; ++i) ASSERT_TRUE(reader.Feed(chunk, counter).ok());
  EXPECT_TRUE(reader.Finish(counter).ok());
  EXPECT_EQ(counter.bytes, 1073741824u);
}

TEST(ReaderProperty, FilesOver4GiBStreamThroughWithUint64Offsets) {
  // 5 GiB of data in two tensors: offsets above 2^32 must survive the wasm32 build (size_t is 32-bit there).
  const uint64_t a = 3ull << 30, b = 2ull << 30;
  std::string json = R"({"a":{"dtype":"U8","shape":[)" + std::to_string(a) + R"(],"data_offsets":[0,)" +
                     std::to_string(a) + R"(]},"b":{"dtype":"F32","shape":[)" + std::to_string(b / 4) +
                     R"(],"data_offsets":[)" + std::to_string(a) + "," + std::to_string(a + b) + "]}}";
  Bytes head = MakeFile(json);
  struct Tracker : ReaderEvents {
    uint64_t seen[2] = {0, 0};
    uint64_t last_b_offset = 0;
    Status OnHeader(const Header& h) override {
      EXPECT_EQ(h.tensor(1).begin, 3ull << 30);
      EXPECT_EQ(h.data_size(), 5ull << 30);
      return Status::Ok();
    }
    Status OnTensorData(size_t t, uint64_t off, std::span<const uint8_t> bytes) override {
      EXPECT_EQ(off, seen[t]);
      seen[t] += bytes.size();
      if (t == 1) last_b_offset = off;
      return Status::Ok();
    }
  } tracker;
  StreamingReader reader(ReaderOptions{head.size() + a + b});
  ASSERT_TRUE(reader.Feed(head, tracker).ok());
  Bytes chunk((4 << 20) + 3, 0);  // odd size, so spans straddle the tensor boundary
  uint64_t left = a + b;
  while (left > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    ASSERT_TRUE(reader.Feed(std::span<const uint8_t>(chunk.data(), n), tracker).ok());
    left -= n;
  }
  ASSERT_TRUE(reader.Finish(tracker).ok());
  EXPECT_EQ(tracker.seen[0], a);
  EXPECT_EQ(tracker.seen[1], b);
  EXPECT_GT(tracker.last_b_offset, (2ull << 30) - chunk.size());
  EXPECT_EQ(reader.bytes_fed(), head.size() + a + b);
}

}  // namespace
}  // namespace pb::testing
