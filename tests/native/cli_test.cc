// The native CLI, run as a user would: exit codes, JSON errors, atomic output.
#ifdef PB_CLI_PATH
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "test_util.h"

namespace pb::testing {
namespace {

namespace fs = std::filesystem;

using CliRun = CliResult;

CliRun Cli(const std::string& args) { return RunCli(args); }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pb_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path Write(const std::string& name, const Bytes& bytes) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return p;
  }
  size_t FileCount() const { return std::distance(fs::directory_iterator(dir_), fs::directory_iterator()); }
  fs::path dir_;
};

Bytes Sample() {
  Bytes data(24);
  float vals[6] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 65504.0f};
  std::memcpy(data.data(), vals, 24);
  return MakeFile(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", data);
}

TEST_F(CliTest, VersionAndHelp) {
  EXPECT_EQ(Cli("--version").out, "peft-bridge 0.1.0\n");
  for (const char* cmd : {"--help", "inspect --help", "convert --help"}) {
    CliRun r = Cli(cmd);
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("usage: peft-bridge"), std::string::npos) << cmd;
  }
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Cli("").status, 2);
  EXPECT_EQ(Cli("frobnicate").status, 2);
  EXPECT_EQ(Cli("inspect").status, 2);
  EXPECT_EQ(Cli("inspect a b").status, 2);
  EXPECT_EQ(Cli("inspect --bogus x").status, 2);
  EXPECT_EQ(Cli("convert a b").status, 2);
  EXPECT_EQ(Cli("convert a b --dtype f64x").status, 2);
  EXPECT_EQ(Cli("convert a b --dtype bf16 --order sideways").status, 2);
}

TEST_F(CliTest, InspectJson) {
  fs::path f = Write("s.safetensors", Sample());
  CliRun r = Cli("inspect --json " + f.string());
  ASSERT_EQ(r.status, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["tensors"][0]["name"], "w");
  EXPECT_EQ(j["tensors"][0]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(j["tensors"][0]["byteLength"], 24);
  EXPECT_EQ(j["metadata"]["format"], "pt");
  EXPECT_EQ(j["parameters"]["F32"], 6);
  CliRun text = Cli("inspect " + f.string());
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.out.find("  w     F32         [2, 3]  24 bytes\n"), std::string::npos) << text.out;
}

TEST_F(CliTest, InvalidInputExitsOneWithJsonError) {
  Bytes bad = Sample();
  bad.pop_back();
  fs::path f = Write("bad.safetensors", bad);
  CliRun r = Cli("inspect --json " + f.string());
  EXPECT_EQ(r.status, 1);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["error"]["code"], "MetadataIncompleteBuffer");
  EXPECT_TRUE(j["error"].contains("message"));
  EXPECT_TRUE(j["error"].contains("tensor"));
  EXPECT_TRUE(j["error"].contains("offset"));
  CliRun missing = Cli("inspect --json " + (dir_ / "nope").string());
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(nlohmann::json::parse(missing.out)["error"]["code"], "IoError");
}

TEST_F(CliTest, ConvertWritesAtomicallyAndLeavesInputAlone) {
  Bytes sample = Sample();
  fs::path in = Write("in.safetensors", sample);
  fs::path out = dir_ / "out.safetensors";
  CliRun r = Cli("convert " + in.string() + " " + out.string() + " --dtype bf16 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["converted"], 1);
  EXPECT_EQ(ReadAll(in), sample);
  Bytes converted = ReadAll(out);
  auto h = ParseWholeFile(converted);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->tensor(0).dtype, Dtype::BF16);
  EXPECT_EQ(FileCount(), 2u);  // no temporary left behind

  // A truncated input fails: exit 1, no output file, no temporary file, existing OUT untouched.
  Bytes bad = sample;
  bad.resize(bad.size() - 2);
  fs::path bad_in = Write("bad.safetensors", bad);
  CliRun f = Cli("convert " + bad_in.string() + " " + out.string() + " --dtype f16");
  EXPECT_EQ(f.status, 1);
  EXPECT_EQ(ReadAll(out), converted);
  EXPECT_EQ(FileCount(), 3u);
  fs::path fresh = dir_ / "fresh.safetensors";
  EXPECT_EQ(Cli("convert " + bad_in.string() + " " + fresh.string() + " --dtype f16").status, 1);
  EXPECT_FALSE(fs::exists(fresh));
  EXPECT_EQ(FileCount(), 3u);

  // OUT may not be IN: refused by the output policy (exit 1), like every output aliasing an input.
  EXPECT_EQ(Cli("convert " + in.string() + " " + in.string() + " --dtype f16").status, 1);
  EXPECT_EQ(ReadAll(in), sample);
}

TEST_F(CliTest, NonRegularFilesAndUnwritableOutputFailCleanly) {
  fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  CliRun r = Cli("inspect --json " + fifo.string());  // must not block opening the FIFO
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(nlohmann::json::parse(r.out)["error"]["code"], "IoError");
  fs::path f = Write("s.safetensors", Sample());
  EXPECT_EQ(Cli("inspect " + f.string() + " >/dev/full").status, 1);
  EXPECT_EQ(Cli("--version >/dev/full").status, 1);
}

TEST_F(CliTest, InterruptedConvertLeavesNothingBehind) {
  // A header declaring a 4 GiB F32 tensor over a sparse file: converting it takes long enough to
  // interrupt. SIGINT must remove the temporary file and exit 130.
  const uint64_t n = 1ull << 30;
  Bytes head = MakeFile(R"({"w":{"dtype":"F32","shape":[)" + std::to_string(n) + R"(],"data_offsets":[0,)" +
                        std::to_string(4 * n) + "]}}");
  fs::path in = Write("big.safetensors", head);
  fs::resize_file(in, head.size() + 4 * n);
  fs::path out = dir_ / "out.safetensors";
  std::string cmd = std::string(PB_CLI_PATH) + " convert " + in.string() + " " + out.string() +
                    " --dtype bf16 >/dev/null 2>&1 & pid=$!; sleep 0.3; kill -INT $pid; wait $pid";
  int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  int code = WEXITSTATUS(st);
  if (code == 0) GTEST_SKIP() << "the conversion finished before the signal";
  EXPECT_EQ(code, 130);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(FileCount(), 1u);  // only the input: no temporary file left
}

TEST_F(CliTest, ConvertOrders) {
  auto dirf = FixturesDir();
  if (!dirf) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  fs::path in = *dirf / "safetensors-jl-dtypes/model.safetensors";
  fs::path a = dir_ / "a.safetensors", b = dir_ / "b.safetensors";
  ASSERT_EQ(Cli("convert " + in.string() + " " + a.string() + " --dtype f16").status, 0);
  ASSERT_EQ(Cli("convert " + in.string() + " " + b.string() + " --dtype f16 --order input").status, 0);
  auto ha = ParseWholeFile(ReadAll(a));
  auto hb = ParseWholeFile(ReadAll(b));
  ASSERT_TRUE(ha.ok() && hb.ok());
  EXPECT_EQ(ha->tensor_count(), hb->tensor_count());
  EXPECT_EQ(ha->file_size(), hb->file_size());
  // Reference order: all F16 tensors sorted by name come before the I16 ones, etc.
  for (size_t i = 1; i < ha->tensor_count(); ++i) {
    TensorInfo p = ha->tensor(i - 1), q = ha->tensor(i);
    EXPECT_TRUE(p.dtype > q.dtype || (p.dtype == q.dtype && p.name < q.name)) << p.name << " then " << q.name;
  }
}

}  // namespace
}  // namespace pb::testing
#endif  // PB_CLI_PATH
