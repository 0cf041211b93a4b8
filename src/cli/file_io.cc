#include "cli/file_io.h"

#include "cli/interrupts.h"
#include "cli/kernel_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>

namespace pb::cli {
namespace {

constexpr size_t kWriteBuffer = 4 << 20;
constexpr size_t kReadChunk = 4 << 20;  // CopyRegionFrom's pieces where the kernel does not copy

Error IoFailure(const std::string& what, const std::string& path) {
  return MakeError(ErrorCode::IoError, what + " `" + path + "`: " + std::strerror(errno));
}

}  // namespace

Result<InputFile> InputFile::Open(const std::string& path) {
  // O_NONBLOCK so that opening a FIFO cannot block; only regular files are accepted below, and
  // reads from regular files ignore the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoFailure("cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Error e = IoFailure("cannot stat", path);
    ::close(fd);
    return e;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return MakeError(ErrorCode::IoError, "`" + path + "` is not a regular file");
  }
  return InputFile(fd, static_cast<uint64_t>(st.st_size), path);
}

InputFile::InputFile(InputFile&& other) noexcept : fd_(other.fd_), size_(other.size_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status InputFile::ReadAt(uint64_t offset, std::span<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoFailure("cannot read", path_);
    }
    if (n == 0) return MakeError(ErrorCode::IoError, "`" + path_ + "` shrank while being read");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<Header> InputFile::ReadHeader() const {
  uint8_t prefix[8];
  size_t have = static_cast<size_t>(std::min<uint64_t>(size_, 8));
  PB_RETURN_IF_ERROR(ReadAt(0, std::span<uint8_t>(prefix, have)));
  PB_ASSIGN_OR_RETURN(auto n, ReadHeaderLength(std::span<const uint8_t>(prefix, have), size_));
  std::string json(n, '\0');
  PB_RETURN_IF_ERROR(ReadAt(8, std::span<uint8_t>(reinterpret_cast<uint8_t*>(json.data()), json.size())));
  return ParseHeader(std::move(json), size_);
}

bool InputFile::IsSameFile(const std::string& path) const {
  struct stat a, b;
  if (::fstat(fd_, &a) != 0 || ::stat(path.c_str(), &b) != 0) return false;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::string InputFile::Identity() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

Result<std::unique_ptr<AtomicOutputFile>> AtomicOutputFile::Create(const std::string& path) {
  std::string temp = path + ".tmp-XXXXXX";
  auto hold = CriticalSection();  // an interrupt finds the file registered, or not created yet
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return IoFailure("cannot create a temporary file for", path);
  TrackTemporary(temp);
  // mkstemp makes the file 0600; give it the mode a plain create would (0666 minus the umask).
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  return std::unique_ptr<AtomicOutputFile>(new AtomicOutputFile(fd, std::move(temp), path));
}

AtomicOutputFile::~AtomicOutputFile() {
  if (fd_ >= 0) ::close(fd_);
  auto hold = CriticalSection();
  if (!committed_) ::unlink(temp_path_.c_str());
  ForgetTemporary(temp_path_);
}

void AtomicOutputFile::MarkRenamed() {
  committed_ = true;
  ForgetTemporary(temp_path_);
}

Status AtomicOutputFile::Park() {
  if (fd_ < 0) return Status::Ok();
  PB_RETURN_IF_ERROR(Flush());
  if (::close(fd_) != 0) {
    fd_ = -1;
    return IoFailure("cannot close", temp_path_);
  }
  fd_ = -1;
  return Status::Ok();
}

Status AtomicOutputFile::Resume() {
  if (fd_ >= 0) return Status::Ok();
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) return IoFailure("cannot reopen", temp_path_);
  return Status::Ok();
}

Status AtomicOutputFile::Flush() {
  size_t done = 0;
  while (done < used_) {
    ssize_t n = ::write(fd_, buffer_.get() + done, used_ - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoFailure("cannot write", temp_path_);
    }
    done += static_cast<size_t>(n);
  }
  used_ = 0;
  return Status::Ok();
}

Status AtomicOutputFile::Write(std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    std::span<uint8_t> dst = Lend(bytes.size());
    std::memcpy(dst.data(), bytes.data(), dst.size());
    bytes = bytes.subspan(dst.size());
    PB_RETURN_IF_ERROR(Commit(dst.size()));
  }
  return Status::Ok();
}

std::span<uint8_t> AtomicOutputFile::Lend(size_t max) {
  if (!buffer_) buffer_.reset(new uint8_t[kWriteBuffer]);
  return std::span<uint8_t>(buffer_.get() + used_, std::min(max, kWriteBuffer - used_));
}

Status AtomicOutputFile::Commit(size_t filled) {
  used_ += filled;
  if (used_ == kWriteBuffer) return Flush();  // a full buffer is flushed, so Lend never returns empty
  return Status::Ok();
}

Status AtomicOutputFile::WriteAt(uint64_t offset, std::span<const uint8_t> bytes) {
  PB_RETURN_IF_ERROR(Flush());
  return WriteRegionAt(offset, bytes);
}

Status AtomicOutputFile::WriteRegionAt(uint64_t offset, std::span<const uint8_t> bytes) const {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, off_t(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoFailure("cannot write", temp_path_);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status AtomicOutputFile::CopyRegionFrom(const InputFile& in, uint64_t in_offset, uint64_t offset, uint64_t n) const {
  uint64_t done = KernelCopy(in.fd_, in_offset, fd_, offset, n);
  if (done == n) return Status::Ok();
  std::vector<uint8_t> buffer(static_cast<size_t>(std::min<uint64_t>(kReadChunk, n - done)));
  while (done < n) {
    const auto piece =
        std::span<uint8_t>(buffer.data(), static_cast<size_t>(std::min<uint64_t>(buffer.size(), n - done)));
    PB_RETURN_IF_ERROR(in.ReadAt(in_offset + done, piece));
    PB_RETURN_IF_ERROR(WriteRegionAt(offset + done, piece));
    done += piece.size();
  }
  return Status::Ok();
}

Status AtomicOutputFile::Prepare() {
  if (fd_ < 0) return Status::Ok();
  PB_RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0) return IoFailure("cannot sync", temp_path_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return IoFailure("cannot close", temp_path_);
  }
  fd_ = -1;
  return Status::Ok();
}

Status AtomicOutputFile::Persist() {
  PB_RETURN_IF_ERROR(Prepare());
  auto hold = CriticalSection();
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) return IoFailure("cannot rename into", final_path_);
  MarkRenamed();
  return Status::Ok();
}

Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path) {
  PB_ASSIGN_OR_RETURN(auto file, InputFile::Open(path));
  std::vector<uint8_t> bytes(static_cast<size_t>(file.size()));
  PB_RETURN_IF_ERROR(file.ReadAt(0, bytes));
  return bytes;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> RegularFiles(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      const std::string path = dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
      if (IsRegularFile(path)) names.push_back(std::move(name));
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<bool> EnsureDirectory(const std::string& path) {
  if (IsDirectory(path)) return false;
  if (::mkdir(path.c_str(), 0777) != 0) return IoFailure("cannot create directory", path);
  return true;
}

void RemoveEmptyDirectory(const std::string& path) { ::rmdir(path.c_str()); }

}  // namespace pb::cli
