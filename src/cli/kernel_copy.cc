#include "cli/kernel_copy.h"

#ifdef __linux__
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#endif

namespace pb::cli {

#ifdef __linux__
namespace {

// The most one call moves: large enough that the calls cost nothing next to the copy, small enough to be
// interrupted in good time.
constexpr uint64_t kMaxCall = 64 << 20;

uint64_t CopyFileRange(int in_fd, uint64_t in_offset, int out_fd, uint64_t out_offset, uint64_t n) {
  uint64_t done = 0;
  while (done < n) {
    loff_t in = static_cast<loff_t>(in_offset + done), out = static_cast<loff_t>(out_offset + done);
    ssize_t got = ::copy_file_range(in_fd, &in, out_fd, &out, std::min(n - done, kMaxCall), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // refused here (EXDEV, EINVAL, ENOSYS, EOPNOTSUPP...), failed, or the input's end
    done += static_cast<uint64_t>(got);
  }
  return done;
}

// A pipe that closes itself, as large as this process may make one (1 MiB by default on Linux).
class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) {
      fds_[0] = fds_[1] = -1;
      return;
    }
    ::fcntl(fds_[1], F_SETPIPE_SZ, 1 << 20);  // refused above the limit: the default size works too
    const int size = ::fcntl(fds_[1], F_GETPIPE_SZ);
    size_ = size > 0 ? static_cast<uint64_t>(size) : 0;
  }
  ~Pipe() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  uint64_t size() const { return size_; }

 private:
  int fds_[2] = {-1, -1};
  uint64_t size_ = 0;
};

uint64_t Splice(int in_fd, uint64_t in_offset, int out_fd, uint64_t out_offset, uint64_t n) {
  Pipe pipe;
  if (pipe.size() == 0) return 0;
  uint64_t done = 0;  // bytes in the output
  while (done < n) {
    loff_t in = static_cast<loff_t>(in_offset + done);
    ssize_t got = ::splice(in_fd, &in, pipe.write_end(), nullptr, std::min(n - done, pipe.size()), SPLICE_F_MOVE);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    // Drained whole before the next fill: what is still in the pipe when the output fails is dropped with it.
    for (uint64_t left = static_cast<uint64_t>(got); left > 0;) {
      loff_t out = static_cast<loff_t>(out_offset + done);
      ssize_t put = ::splice(pipe.read_end(), nullptr, out_fd, &out, left, SPLICE_F_MOVE);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) return done;
      done += static_cast<uint64_t>(put);
      left -= static_cast<uint64_t>(put);
    }
  }
  return done;
}

}  // namespace

uint64_t KernelCopy(KernelCopyWay way, int in_fd, uint64_t in_offset, int out_fd, uint64_t out_offset, uint64_t n) {
  return way == KernelCopyWay::kCopyFileRange ? CopyFileRange(in_fd, in_offset, out_fd, out_offset, n)
                                              : Splice(in_fd, in_offset, out_fd, out_offset, n);
}
#else
uint64_t KernelCopy(KernelCopyWay, int, uint64_t, int, uint64_t, uint64_t) { return 0; }
#endif

uint64_t KernelCopy(int in_fd, uint64_t in_offset, int out_fd, uint64_t out_offset, uint64_t n) {
  uint64_t done = KernelCopy(KernelCopyWay::kCopyFileRange, in_fd, in_offset, out_fd, out_offset, n);
  if (done < n)
    done += KernelCopy(KernelCopyWay::kSplice, in_fd, in_offset + done, out_fd, out_offset + done, n - done);
  return done;
}

}  // namespace pb::cli
