// File access for the native CLI: the only place in the native build that touches the file system.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>
#include <span>
#include <string>

#include "core/header.h"
#include "core/writer.h"

namespace pb::cli {

class AtomicOutputFile;

// A read-only file read with pread (random access; the file is never modified).
class InputFile {
 public:
  static Result<InputFile> Open(const std::string& path);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  ~InputFile();
  uint64_t size() const { return size_; }
  Status ReadAt(uint64_t offset, std::span<uint8_t> out) const;
  // Reads and validates the header (all checks, coverage against the file size).
  Result<Header> ReadHeader() const;
  // True if `path` names this same file (same device and inode).
  bool IsSameFile(const std::string& path) const;
  // "device:inode" of the open file.
  std::string Identity() const;

 private:
  friend class AtomicOutputFile;  // CopyRegionFrom hands both descriptors to the kernel
  InputFile(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Writes to a temporary file beside the destination and renames it into place on Persist, so readers
// never see a partial file. If Persist is not reached, the destructor removes the temporary file.
class AtomicOutputFile final : public ByteSink {
 public:
  static Result<std::unique_ptr<AtomicOutputFile>> Create(const std::string& path);
  ~AtomicOutputFile() override;
  Status Write(std::span<const uint8_t> bytes) override;
  std::span<uint8_t> Lend(size_t max) override;
  Status Commit(size_t filled) override;
  // Overwrites bytes already written at `offset` (after flushing what is buffered): for a header that is known
  // only once the data after it is written (extract reserves its region, then fills it).
  Status WriteAt(uint64_t offset, std::span<const uint8_t> bytes);
  // Writes `bytes` at `offset` with pwrite, leaving the write-behind buffer alone: threads that fill disjoint
  // ranges of the file (merge --threads) may call it at once. Nothing may be written with Write meanwhile.
  Status WriteRegionAt(uint64_t offset, std::span<const uint8_t> bytes) const;
  // Copies `n` bytes of `in` from `in_offset` to `offset`, a region as WriteRegionAt's: inside the kernel where it
  // can (cli/kernel_copy.h: no trip through user memory), the rest with pread and pwrite, whose errors name the
  // file.
  Status CopyRegionFrom(const InputFile& in, uint64_t in_offset, uint64_t offset, uint64_t n) const;
  // Flushes, syncs and closes the temporary file (Persist does this too). Commands writing several files
  // prepare them all before renaming any, so a failure leaves none of them under its final name.
  Status Prepare();
  // Flushes, syncs and renames the temporary file over the destination.
  Status Persist();
  // For OutputTransaction, which renames the prepared file itself: the paths, and that the rename happened
  // (the destructor then leaves the file alone).
  const std::string& temp_path() const { return temp_path_; }
  const std::string& final_path() const { return final_path_; }
  void MarkRenamed();
  // Closes the file (after flushing) without syncing it, and opens it again for more writes: a command writing
  // many files at once (merge's shards) keeps only those it is writing open, not one descriptor per file.
  Status Park();
  Status Resume();

 private:
  AtomicOutputFile(int fd, std::string temp_path, std::string final_path)
      : fd_(fd), temp_path_(std::move(temp_path)), final_path_(std::move(final_path)) {}
  Status Flush();
  int fd_ = -1;
  std::string temp_path_;
  std::string final_path_;
  std::unique_ptr<uint8_t[]> buffer_;  // write-behind buffer of kBufferSize bytes
  size_t used_ = 0;
  bool committed_ = false;
};

// A whole (small) file: adapters and configs, never base models.
Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path);
bool IsDirectory(const std::string& path);
bool IsRegularFile(const std::string& path);
// The names of the regular files (links followed) directly in `dir`, sorted: what a Hub folder's listing gives.
std::vector<std::string> RegularFiles(const std::string& dir);
// Creates `path` unless it is a directory already; true if it was created.
Result<bool> EnsureDirectory(const std::string& path);
// Removes a directory this command created, if it is still empty (after a failure).
void RemoveEmptyDirectory(const std::string& path);

}  // namespace pb::cli
