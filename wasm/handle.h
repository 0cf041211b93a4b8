// What every Embind handle shares (wasm/bindings.cc's conventions, which web/src/*.js relies on): the
// page-aligned input window JS copies into, the chunk table of output it copies out after each call, and the
// last error. Registered once, as "Handle", in wasm/bindings.cc; every other handle class derives from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "app/report.h"
#include "core/error.h"
#include "core/writer.h"

namespace pb::wasm {

// A size as JS passes it: a double below 2^53, or < 0 (or NaN) when unknown.
inline std::optional<uint64_t> KnownSize(double size) {
  if (!(size >= 0)) return std::nullopt;
  return static_cast<uint64_t>(size);
}

// A page-aligned input buffer that only grows. Page alignment keeps large copies out of 4K aliasing.
class Window {
 public:
  Window() = default;
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window() { std::free(data_); }

  // The window's address, holding at least n bytes; nullptr if that much cannot be allocated, in which case
  // the current buffer (and its contents' address) is kept.
  uint8_t* Reserve(size_t n) {
    if (n > capacity_ || data_ == nullptr) {
      constexpr size_t kPage = 4096;
      if (n > SIZE_MAX - kPage) return nullptr;  // rounding up would wrap
      size_t cap = std::max<size_t>({n, capacity_ + capacity_ / 2, size_t{64} << 10});
      if (cap > SIZE_MAX - kPage) cap = n;
      cap = (cap + kPage - 1) & ~(kPage - 1);
      auto* grown = static_cast<uint8_t*>(std::aligned_alloc(kPage, cap));
      if (!grown && cap > n) {  // the growth margin may be what does not fit
        cap = (n + kPage - 1) & ~(kPage - 1);
        grown = static_cast<uint8_t*>(std::aligned_alloc(kPage, cap));
      }
      if (!grown) return nullptr;
      std::free(data_);
      data_ = grown;
      capacity_ = cap;
    }
    return data_;
  }
  // The n bytes JS has copied in, or an empty span when n exceeds what was reserved.
  std::optional<std::span<const uint8_t>> Filled(size_t n) const {
    if (n > capacity_) return std::nullopt;
    return std::span<const uint8_t>(data_, n);
  }
  const uint8_t* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

// Collects reader events and sink writes for one call (see the chunk table convention above).
// Converted output is produced straight into `owned_` through Lend/Commit (no staging copy), and
// adjacent sink writes are merged into one table entry, so JS copies each call's output out in as
// few slices as possible.
class Chunks : public ByteSink {
 public:
  explicit Chunks(const Window& window) : window_(window) {}
  void Clear() {
    table_.clear();
    used_ = 0;
  }
  // Records bytes for the table; fails (nothing recorded) when the owned buffer cannot grow to hold a copy.
  Status Add(double tensor, double offset, std::span<const uint8_t> bytes) {
    if (bytes.empty()) return Status::Ok();
    const uint8_t* w = window_.data();
    if (w && bytes.data() >= w && bytes.data() + bytes.size() <= w + window_.capacity()) {
      Append(tensor, offset, 1.0, double(bytes.data() - w), bytes.size());
      return Status::Ok();
    }
    std::span<uint8_t> dst = Lend(bytes.size());
    if (dst.size() < bytes.size()) return OutOfMemory(used_ + bytes.size());
    std::memcpy(dst.data(), bytes.data(), bytes.size());
    Append(tensor, offset, 0.0, double(used_), bytes.size());
    used_ += bytes.size();
    return Status::Ok();
  }
  Status Write(std::span<const uint8_t> bytes) override { return Add(-1, 0, bytes); }
  // Lends nothing when the owned buffer cannot grow; producers then fall back to Write, which fails.
  std::span<uint8_t> Lend(size_t max) override {
    if (max > SIZE_MAX - 4096 - used_) return {};
    if (used_ + max > capacity_) {
      size_t cap = std::max(used_ + max, capacity_ + capacity_ / 2);
      if (cap > SIZE_MAX - 4096) cap = used_ + max;
      cap = (cap + 4095) & ~size_t{4095};
      auto* grown = static_cast<uint8_t*>(std::aligned_alloc(4096, cap));  // page-aligned: no 4K aliasing
      if (!grown) return {};
      if (used_) std::memcpy(grown, owned_.get(), used_);
      owned_.reset(grown);
      capacity_ = cap;
    }
    return std::span<uint8_t>(owned_.get() + used_, max);
  }
  Status Commit(size_t filled) override {
    if (filled > capacity_ - used_) return MakeError(ErrorCode::InvalidArgument, "committed more bytes than lent");
    if (filled) Append(-1, 0, 0.0, double(used_), filled);
    used_ += filled;
    return Status::Ok();
  }
  // The calls from now on produce into the other owned buffer, leaving this one's bytes (the views JS took of
  // the last call's output) untouched until the next Flip: JS may write them out while the module goes on.
  void Flip() {
    std::swap(owned_, spare_);
    std::swap(capacity_, spare_capacity_);
    table_.clear();
    used_ = 0;
  }
  uintptr_t table() const { return reinterpret_cast<uintptr_t>(table_.data()); }
  size_t count() const { return table_.size() / 5; }
  uintptr_t owned() const { return reinterpret_cast<uintptr_t>(owned_.get()); }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  // Appends a table row, or extends the previous one when this is a sink write continuing it in memory.
  void Append(double tensor, double offset, double in_window, double start, size_t size) {
    size_t n = table_.size();
    if (tensor < 0 && n >= 5 && table_[n - 5] < 0 && table_[n - 3] == in_window &&
        table_[n - 2] + table_[n - 1] == start) {
      table_[n - 1] += double(size);
      return;
    }
    table_.insert(table_.end(), {tensor, offset, in_window, start, double(size)});
  }
  static Error OutOfMemory(size_t n) {
    return MakeError(ErrorCode::IoError, "out of memory: cannot reserve " + std::to_string(n) + " bytes");
  }
  const Window& window_;
  std::vector<double> table_;
  std::unique_ptr<uint8_t, FreeDeleter> owned_;
  size_t used_ = 0;
  size_t capacity_ = 0;
  std::unique_ptr<uint8_t, FreeDeleter> spare_;  // the other owned buffer (Flip), allocated on first use
  size_t spare_capacity_ = 0;
};

// The parts every handle shares: window, chunk table, last error.
class Handle {
 public:
  Handle() : chunks_(window_) {}
  // The window's address for n bytes, or 0 when they cannot be allocated (the old window is kept; JS must
  // not copy anything in).
  uintptr_t window(size_t n) { return reinterpret_cast<uintptr_t>(window_.Reserve(n)); }
  uintptr_t chunk_table() const { return chunks_.table(); }
  size_t chunk_count() const { return chunks_.count(); }
  uintptr_t owned_bytes() const { return chunks_.owned(); }
  // Keeps the last call's owned output as it is until the next flip_output() (Chunks::Flip).
  void flip_output() { chunks_.Flip(); }
  std::string error_json() const { return error_ ? RenderErrorJson(*error_) : std::string(); }
  std::string error_text() const { return error_ ? RenderErrorText(*error_) : std::string(); }

 protected:
  bool Check(const Status& s) {
    if (!s.ok()) Hold(s.error());
    return s.ok();
  }
  bool Fail(Error e) {
    Hold(e);
    return false;
  }
  // Fails with the error prefixed by a file's name, as the native CLI names it.
  bool FailNamed(const std::string& name, Error e) {
    e.message = name + ": " + e.message;
    return Fail(std::move(e));
  }
  // Starts a call that consumes n window bytes.
  std::optional<std::span<const uint8_t>> Begin(size_t n) {
    chunks_.Clear();
    auto bytes = window_.Filled(n);
    if (!bytes) Hold(MakeError(ErrorCode::InvalidArgument, "more bytes than the window holds"));
    return bytes;
  }
  // The error copied into the one the handle holds, whose text keeps its memory: a handle failing call after call
  // then keeps the same allocations. A moved-in error would trade buffers each time (the new text is allocated
  // while the old one lives), so the heap's in-use count would alternate with the chunks they land in.
  void Hold(const Error& e) { error_ = e; }

  Window window_;
  Chunks chunks_;
  std::optional<Error> error_;
};

}  // namespace pb::wasm
