// The native executor of jobs (cli/job_runner.h), through `peft-bridge convert`: forwarded ranges (copied in the
// kernel where it can, read and written otherwise) land at the job's offsets beside the written ones, and the
// bytes equal the core converter's whatever the mix, the order and the size.
#ifdef PB_CLI_PATH
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "cli_runner.h"
#include "convert/convert_stream.h"
#include "test_util.h"

namespace pb::testing {
namespace {

namespace fs = std::filesystem;

// `count` tensors of `bytes_each` bytes, alternating BF16 (kept by --dtype bf16: forwarded) and F32 (converted), then
// I64.
Bytes Interleaved(int count, size_t bytes_each) {
  std::mt19937 rng(9);
  std::string json = "{";
  Bytes data;
  for (int i = 0; i < count; ++i) {
    const bool bf16 = i % 2 == 0;
    const size_t elements = bytes_each / (bf16 ? 2 : 4);
    json += std::string(i ? "," : "") + "\"t" + std::to_string(count - i) + R"(":{"dtype":")" +
            (bf16 ? "BF16" : "F32") + R"(","shape":[)" + std::to_string(elements) + R"(],"data_offsets":[)" +
            std::to_string(data.size()) + "," + std::to_string(data.size() + bytes_each) + "]}";
    for (size_t e = 0; e < elements; ++e) {
      const float f = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 13.0f;
      uint8_t b[4];
      std::memcpy(b, &f, 4);
      if (bf16) data.insert(data.end(), b + 2, b + 4);
      else data.insert(data.end(), b, b + 4);
    }
  }
  json += R"(,"ids":{"dtype":"I64","shape":[3],"data_offsets":[)" + std::to_string(data.size()) + "," +
          std::to_string(data.size() + 24) + "]}}";
  data.insert(data.end(), 24, 7);
  return MakeFile(json, data);
}

Bytes Expected(const Bytes& file, TensorOrder order) {
  auto header = ParseWholeFile(file);
  EXPECT_TRUE(header.ok());
  auto plan = PlanConversion(header.value(), Dtype::BF16, order);
  EXPECT_TRUE(plan.ok());
  VectorSink sink;
  TensorBytesConverter conv(std::move(plan.value()), sink);
  EXPECT_TRUE(conv.Begin().ok());
  for (size_t src : conv.plan().source_tensor) {
    TensorInfo t = header->tensor(src);
    EXPECT_TRUE(conv.Push(std::span(file.data() + header->data_start() + t.begin, t.end - t.begin)).ok());
  }
  EXPECT_TRUE(conv.Finish().ok());
  return sink.bytes;
}

TEST(JobRunner, ForwardedAndWrittenRangesLandWhereTheJobSays) {
  const fs::path dir = fs::temp_directory_path() / ("pb-job-runner-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // Tensors over one read piece (8 MiB), so reads take several pieces and forwards are larger than a piece.
  const Bytes file = Interleaved(5, (9 << 20) + 4);
  WriteFile(dir / "in.safetensors", file);
  for (const char* order : {"reference", "input"}) {
    const fs::path out = dir / "out.safetensors";
    const CliResult r = RunCli(
        "convert " + (dir / "in.safetensors").string() + " " + out.string() + " --dtype bf16 -q --order " + order,
        true);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(r.out, "");
    const Bytes got = ReadAll(out);
    EXPECT_TRUE(got == Expected(file, std::string(order) == "input" ? TensorOrder::kInput : TensorOrder::kReference))
        << order;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);  // no temporary left
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pb::testing
#endif  // PB_CLI_PATH
