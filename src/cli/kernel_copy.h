// Copying a byte range from one open file to another inside the kernel, never through user memory: the native
// CLI's merge forwards the tensors an adapter leaves unchanged this way (cli/merge_command.cc). Linux only; other
// systems copy nothing here and the caller reads and writes (AtomicOutputFile::CopyRegionFrom).
#pragma once

#include <cstdint>

namespace pb::cli {

enum class KernelCopyWay {
  // copy_file_range: on one file system, a reflink or the file system's own copy; refused between most others.
  kCopyFileRange,
  // splice through a pipe: the input's page-cache pages into the pipe, then one copy into the output.
  kSplice,
};

// Copies up to `n` bytes from `in_fd` at `in_offset` to `out_fd` at `out_offset` the given way. Positional: neither
// file's offset moves, so threads may copy disjoint ranges into one output at once. Returns how many bytes it
// copied from the start of the range: fewer than `n` when that way does not work between these two files, or
// stops part way (an error, the input's end). The caller copies the rest itself, and its reads and writes report
// what is wrong.
uint64_t KernelCopy(KernelCopyWay way, int in_fd, uint64_t in_offset, int out_fd, uint64_t out_offset, uint64_t n);

// copy_file_range, then splice for what it did not copy.
uint64_t KernelCopy(int in_fd, uint64_t in_offset, int out_fd, uint64_t out_offset, uint64_t n);

}  // namespace pb::cli
