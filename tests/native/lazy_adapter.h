// Test helpers for adapters whose tensors are references (read from the header only): turning a held adapter
// into one that references a byte blob, and an edge that supplies what a consumer asks for in chosen chunks.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "adapter/adapter.h"
#include "adapter/tensor_fetch.h"
#include "adapter_fixtures.h"

namespace pb::testing {

// `adapter` with every tensor moved into `blob` (module by module: A, B, bias, magnitude; then the extras)
// and replaced by a reference to its range there. Offsets start at `base_offset` (so they are not file-relative
// by accident).
struct ExternalAdapter {
  adapter::Adapter adapter;
  Bytes blob;
  uint64_t base_offset = 0;
};

inline void Externalize(adapter::Tensor& t, Bytes& blob, uint64_t base_offset) {
  if (!t.held()) return;
  const uint64_t begin = base_offset + blob.size();
  blob.insert(blob.end(), t.bytes.begin(), t.bytes.end());
  t.ref = adapter::TensorRef{{begin, base_offset + blob.size()}, t.shape, {}};
  t.bytes.clear();
  t.bytes.shrink_to_fit();
}

inline ExternalAdapter Externalized(const adapter::Adapter& held, uint64_t base_offset = 1000) {
  ExternalAdapter e{held, {}, base_offset};
  for (auto& m : e.adapter.modules) {
    Externalize(m.a, e.blob, base_offset);
    Externalize(m.b, e.blob, base_offset);
    if (m.b_bias) Externalize(*m.b_bias, e.blob, base_offset);
    if (m.magnitude) Externalize(*m.magnitude, e.blob, base_offset);
  }
  for (auto& x : e.adapter.extras) Externalize(x.tensor, e.blob, base_offset);
  return e;
}

// The most adapter bytes one planned tensor can need: a module's factors (A, B, magnitude, or its bias), plus
// a saved full copy the merge starts from; or one extra tensor.
inline uint64_t LargestModuleBytes(const adapter::Adapter& a) {
  uint64_t largest_extra = 0, largest = 0;
  for (const auto& x : a.extras) largest_extra = std::max(largest_extra, x.tensor.byte_length());
  for (const auto& m : a.modules) {
    uint64_t factors = m.a.byte_length() + m.b.byte_length() + (m.magnitude ? m.magnitude->byte_length() : 0);
    largest = std::max({largest, factors, m.b_bias ? m.b_bias->byte_length() : 0});
  }
  return largest + largest_extra;
}

// How an edge cuts the bytes it supplies: 0 = each needed range whole, 1 = one byte at a time, else pseudo-random
// sizes from that seed.
struct Chunking {
  uint64_t mode = 0;
};

// Supplies what `consumer` asks for from `file` (a buffer whose byte 0 is at offset `file_offset`) until it
// asks for nothing. Returns the first failure.
inline Status SupplyFrom(adapter::AdapterBytesConsumer& consumer, const Bytes& file, uint64_t file_offset,
                         Chunking chunking, uint64_t* supplied = nullptr) {
  Values v(chunking.mode + 17);
  for (;;) {
    const std::vector<adapter::ByteRange> needs(consumer.adapter_needs().begin(), consumer.adapter_needs().end());
    if (needs.empty()) return Status::Ok();
    for (const auto& r : needs) {
      if (r.begin < file_offset || r.end - file_offset > file.size())
        return MakeError(ErrorCode::InvalidArgument, "asked for bytes outside the file");
      for (uint64_t pos = r.begin; pos < r.end;) {
        uint64_t n = r.end - pos;
        if (chunking.mode == 1) n = 1;
        else if (chunking.mode > 1) n = std::min<uint64_t>(n, 1 + static_cast<uint64_t>(0.5 * (v.Next() + 1.0) * 300));
        if (Status s = consumer.SupplyAdapter(std::span<const uint8_t>(file.data() + (pos - file_offset), n)); !s.ok())
          return s;
        if (supplied) *supplied += n;
        pos += n;
      }
    }
  }
}

// A TensorFetch driven like any consumer.
class FetchConsumer final : public adapter::AdapterBytesConsumer {
 public:
  explicit FetchConsumer(adapter::TensorFetch& fetch) : fetch_(fetch) {}
  std::span<const adapter::ByteRange> adapter_needs() const override { return fetch_.needs(); }
  Status SupplyAdapter(std::span<const uint8_t> bytes) override { return fetch_.Supply(bytes); }

 private:
  adapter::TensorFetch& fetch_;
};

// `a` with every referenced tensor fetched from `file` (offset 0) in one request, `chunking` as given.
inline Result<adapter::Adapter> MaterializeAll(const adapter::Adapter& a, const Bytes& file, Chunking chunking) {
  adapter::Adapter out = a;
  std::vector<adapter::Tensor*> slots;
  for (auto& m : out.modules) {
    slots.push_back(&m.a);
    slots.push_back(&m.b);
    if (m.b_bias) slots.push_back(&*m.b_bias);
    if (m.magnitude) slots.push_back(&*m.magnitude);
  }
  for (auto& x : out.extras) slots.push_back(&x.tensor);
  adapter::TensorFetch fetch;
  fetch.Request(std::vector<const adapter::Tensor*>(slots.begin(), slots.end()));
  FetchConsumer consumer(fetch);
  if (Status s = SupplyFrom(consumer, file, 0, chunking); !s.ok()) return s.error();
  if (!fetch.ready()) return MakeError(ErrorCode::InvalidArgument, "fetch not complete");
  std::vector<adapter::Tensor> made;
  for (size_t i = 0; i < slots.size(); ++i) made.push_back(*fetch.get(i));
  for (size_t i = 0; i < slots.size(); ++i) *slots[i] = std::move(made[i]);
  return out;
}

}  // namespace pb::testing
