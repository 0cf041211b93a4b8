// The native CLI's file-to-file copies (cli/kernel_copy.h, AtomicOutputFile::CopyRegionFrom), which the merge uses
// for the tensors an adapter leaves unchanged: each way copies exactly the range asked, at the offsets asked, and
// touches nothing else; it says how far it got where it stops (the input's end); CopyRegionFrom finishes what the
// kernel does not and reports a short input as the reads do. Native builds only (Linux system calls).
#ifdef PB_CLI_PATH
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "cli/file_io.h"
#include "cli/kernel_copy.h"
#include "cli_runner.h"  // WriteFile (and ReadAll, from test_util.h)

namespace pb::cli {
namespace {

namespace fs = std::filesystem;
using ::pb::testing::Bytes;
using ::pb::testing::ReadAll;
using ::pb::testing::WriteFile;

Bytes Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<uint8_t>(gen());
  return b;
}

class KernelCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pb-kernel-copy-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Copies `n` bytes from `in_offset` of a random input to `out_offset` of an output full of 0xEE, `way` (or both,
  // when null), and checks the output: the range copied, everything else as it was. Returns what the copy said.
  uint64_t CopyAndCheck(const fs::path& out_dir, const KernelCopyWay* way, uint64_t in_size, uint64_t in_offset,
                        uint64_t out_offset, uint64_t n) {
    const Bytes input = Random(in_size, static_cast<uint32_t>(in_size + n));
    const Bytes before(out_offset + n + 4099, 0xEE);
    WriteFile(dir_ / "in", input);
    WriteFile(out_dir / "out", before);
    const int in = ::open((dir_ / "in").c_str(), O_RDONLY | O_CLOEXEC);
    const int out = ::open((out_dir / "out").c_str(), O_WRONLY | O_CLOEXEC);
    EXPECT_GE(in, 0);
    EXPECT_GE(out, 0);
    const uint64_t done = way ? KernelCopy(*way, in, in_offset, out, out_offset, n)
                              : KernelCopy(in, in_offset, out, out_offset, n);
    EXPECT_EQ(::lseek(in, 0, SEEK_CUR), 0) << "the input's offset moved";
    EXPECT_EQ(::lseek(out, 0, SEEK_CUR), 0) << "the output's offset moved";
    ::close(in);
    ::close(out);
    Bytes expected = before;
    std::copy_n(input.begin() + std::ptrdiff_t(in_offset), done, expected.begin() + std::ptrdiff_t(out_offset));
    EXPECT_EQ(ReadAll(out_dir / "out"), expected);
    return done;
  }

  fs::path dir_;
};

constexpr uint64_t kMiB = 1 << 20;

TEST_F(KernelCopyTest, SpliceCopiesARangeLargerThanItsPipeAtItsOffsets) {
  const KernelCopyWay way = KernelCopyWay::kSplice;
  EXPECT_EQ(CopyAndCheck(dir_, &way, 5 * kMiB + 123, 4097, 12345, 3 * kMiB + 7), 3 * kMiB + 7);
  EXPECT_EQ(CopyAndCheck(dir_, &way, 100, 0, 0, 100), 100u);
}

TEST_F(KernelCopyTest, CopyFileRangeCopiesWhatItCopiesExactly) {
  // Within one file system it normally copies everything; some (and older kernels) refuse: then nothing.
  const KernelCopyWay way = KernelCopyWay::kCopyFileRange;
  const uint64_t done = CopyAndCheck(dir_, &way, 5 * kMiB + 123, 4097, 12345, 3 * kMiB + 7);
  EXPECT_TRUE(done == 0 || done == 3 * kMiB + 7) << done;
}

TEST_F(KernelCopyTest, EitherWayStopsAtTheInputsEnd) {
  for (KernelCopyWay way : {KernelCopyWay::kCopyFileRange, KernelCopyWay::kSplice}) {
    const uint64_t done = CopyAndCheck(dir_, &way, 2 * kMiB, 2 * kMiB - 1000, 77, 5000);
    EXPECT_TRUE(done == 1000 || (way == KernelCopyWay::kCopyFileRange && done == 0)) << done;
  }
  EXPECT_EQ(CopyAndCheck(dir_, nullptr, 2 * kMiB, 2 * kMiB - 1000, 77, 5000), 1000u);
}

TEST_F(KernelCopyTest, BothWaysTogetherCopyBetweenFileSystems) {
  EXPECT_EQ(CopyAndCheck(dir_, nullptr, 3 * kMiB, 10, 20, 3 * kMiB - 10), 3 * kMiB - 10);
  // tmpfs beside the temporary directory's file system, where there is one: copy_file_range refuses, splice copies.
  struct stat a, b;
  if (::stat("/dev/shm", &b) != 0 || ::stat(dir_.c_str(), &a) != 0 || a.st_dev == b.st_dev)
    GTEST_SKIP() << "no second file system";
  const fs::path shm = fs::path("/dev/shm") / ("pb-kernel-copy-" + std::to_string(::getpid()));
  fs::create_directories(shm);
  EXPECT_EQ(CopyAndCheck(shm, nullptr, 3 * kMiB, 10, 20, 3 * kMiB - 10), 3 * kMiB - 10);
  fs::remove_all(shm);
}

TEST_F(KernelCopyTest, NothingIsCopiedIntoAFileNotOpenForWriting) {
  WriteFile(dir_ / "in", Random(1000, 1));
  WriteFile(dir_ / "out", Bytes(1000, 0xEE));
  const int in = ::open((dir_ / "in").c_str(), O_RDONLY | O_CLOEXEC);
  const int out = ::open((dir_ / "out").c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(KernelCopy(in, 0, out, 0, 1000), 0u);
  ::close(in);
  ::close(out);
  EXPECT_EQ(ReadAll(dir_ / "out"), Bytes(1000, 0xEE));
}

TEST_F(KernelCopyTest, CopyRegionFromFinishesWhatTheKernelLeavesAndReportsAShortInput) {
  const Bytes input = Random(3 * kMiB, 9);
  WriteFile(dir_ / "in", input);
  auto in = InputFile::Open((dir_ / "in").string());
  ASSERT_TRUE(in.ok());
  auto out = AtomicOutputFile::Create((dir_ / "out").string());
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(out.value()->WriteRegionAt(0, Bytes(4 * kMiB, 0xEE)).ok());
  ASSERT_TRUE(out.value()->CopyRegionFrom(in.value(), 5, 1000, 3 * kMiB - 5).ok());
  // Past the input's end: the kernel copies what there is, the reads then find the file short.
  Status past = out.value()->CopyRegionFrom(in.value(), 3 * kMiB - 10, 0, 100);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().message, "`" + (dir_ / "in").string() + "` shrank while being read");
  ASSERT_TRUE(out.value()->Persist().ok());
  Bytes expected(4 * kMiB, 0xEE);
  std::copy(input.end() - 10, input.end(), expected.begin());  // the 10 bytes the kernel did copy
  std::copy(input.begin() + 5, input.end(), expected.begin() + 1000);
  EXPECT_EQ(ReadAll(dir_ / "out"), expected);
}

}  // namespace
}  // namespace pb::cli
#endif  // PB_CLI_PATH
