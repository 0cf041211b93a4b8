// Fetching referenced adapter tensors, sans I/O. A consumer (the merge, the ‖ΔW‖ pass, the translate writer)
// says which ranges of the adapter file it needs next; the edge reads them (pread, Blob.slice, an HTTP Range)
// and supplies their bytes, in the order listed, concatenated, in chunks of any size. Only what one step needs
// is held, so memory is bounded by the largest module's factors, not by the file.
#pragma once

#include <span>
#include <vector>

#include "adapter/adapter.h"
#include "core/error.h"

namespace pb::adapter {

// What an edge drives: while adapter_needs() is not empty, read those ranges and SupplyAdapter their bytes.
// The list can change once the last byte of it is supplied (the consumer moves on), so edges copy it first.
class AdapterBytesConsumer {
 public:
  virtual ~AdapterBytesConsumer() = default;
  virtual std::span<const ByteRange> adapter_needs() const = 0;
  virtual Status SupplyAdapter(std::span<const uint8_t> bytes) = 0;
};

// Makes one set of tensors whole. Adjacent ranges are coalesced into one read (a module's A, B and magnitude
// usually follow each other in the file); each tensor's bytes land in their own buffer, so a tensor with no
// rearrangement is not copied again.
class TensorFetch {
 public:
  // Starts a new set (the previous set's bytes are released). Held tensors (or null) need nothing.
  void Request(std::vector<const Tensor*> tensors);
  // Once ready(): one more tensor for the current set (e.g. the next block of a factor's rows), its index returned
  // for get() and ReleaseOne(); the tensors held so far stay. `t` must outlive the set. Invalidates the Tensor
  // pointers get() returned (their bytes stay where they are).
  size_t Add(const Tensor* t);
  std::span<const ByteRange> needs() const { return needs_; }  // empty once every byte has arrived
  Status Supply(std::span<const uint8_t> bytes);
  bool ready() const { return needs_.empty(); }
  // The i-th requested tensor, held (valid until the next Request, Release or Add; its bytes until the next Request,
  // Release or ReleaseOne(i)); null where null was requested.
  const Tensor* get(size_t i) const;
  void Release();
  // Frees the i-th tensor's bytes once the consumer has taken what it needs (e.g. converted it to fp32).
  void ReleaseOne(size_t i);
  uint64_t held_bytes() const { return held_; }  // fetched adapter bytes held now
  uint64_t peak_bytes() const { return peak_; }  // the most held at once since construction

 private:
  Status Complete(size_t lazy_index);
  Status CompleteEmpty();
  void Recount(uint64_t transient);
  const TensorRef& RefOf(size_t lazy_index) const;
  std::vector<const Tensor*> requested_;
  std::vector<size_t> lazy_;                  // indices into requested_ of the referenced tensors
  std::vector<std::vector<uint8_t>> stored_;  // per lazy tensor: its bytes as they arrive
  std::vector<Tensor> made_;                  // per lazy tensor, once complete
  std::vector<ByteRange> needs_;
  size_t filling_ = 0;  // the lazy tensor the next supplied byte belongs to
  uint64_t held_ = 0, peak_ = 0;
  Status pending_status_ = Status::Ok();  // a failure met by Request (an empty tensor's rearrangement)
};

// The ranges of `header`'s tensors of at most kInlineTensorBytes bytes (kohya's 0-dim alphas), which readers
// inspect while reading: header-only sources supply these bytes with the header (AdapterSource::inline_bytes).
inline constexpr uint64_t kInlineTensorBytes = 16;
std::vector<size_t> InlineTensorIndices(const Header& header);
std::vector<ByteRange> InlineTensorRanges(const Header& header);

}  // namespace pb::adapter
