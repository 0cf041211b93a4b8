// Streaming safetensors writer. The header depends only on names, dtypes and shapes, so it is
// computed up front (PlanWrite) and emitted before any data; tensor bytes are then pushed in plan
// order and passed straight through to the sink. Nothing beyond the chunk in flight is held.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/header.h"

namespace pb {

struct TensorSpec {
  std::string name;
  Dtype dtype;
  std::vector<uint64_t> shape;
};

enum class TensorOrder {
  // The Rust serializer's order: dtype descending in enum order, then name by bytes. Re-serializing a
  // file written by Python safetensors then gives identical bytes.
  kReference,
  // The input's order, for streaming a source through unchanged in layout.
  kInput,
};

struct PlannedTensor {
  size_t input_index;  // position in the TensorSpec list given to PlanWrite
  uint64_t begin;      // data_offsets, relative to the data region
  uint64_t end;
};

struct WritePlan {
  std::string header;                  // 8-byte length prefix + compact JSON padded with spaces to 8
  std::vector<PlannedTensor> tensors;  // in the order their bytes must be written
  uint64_t data_size = 0;              // sum of the tensors' byte lengths
  uint64_t total_size() const { return header.size() + data_size; }
};

// Builds the header. Metadata, when given (even empty), is written first as `__metadata__`; its keys
// are sorted by bytes (the reference's order is random, so sorting is our deterministic choice).
// Errors: InvalidArgument (repeated or reserved name), ValidationOverflow, MisalignedSlice,
// HeaderTooLarge (padded JSON over 100,000,000 bytes).
Result<WritePlan> PlanWrite(const std::vector<TensorSpec>& tensors, const std::optional<Metadata>& metadata,
                            TensorOrder order);

// Appends `text` as a JSON string literal with serde_json's escaping.
void AppendJsonString(std::string& out, std::string_view text);
// The number of bytes AppendJsonString appends for `text`, quotes included.
size_t JsonStringLength(std::string_view text);

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status Write(std::span<const uint8_t> bytes) = 0;
  // Optional zero-copy path: a sink with its own buffer may lend up to `max` bytes of it; the producer
  // fills a prefix of the span and calls Commit with the count. Converters write straight into it
  // instead of staging and copying. The default lends nothing, and producers fall back to Write.
  virtual std::span<uint8_t> Lend(size_t max) {
    (void)max;
    return {};
  }
  virtual Status Commit(size_t filled) {
    (void)filled;
    return Status::Ok();
  }
};

class StreamingWriter {
 public:
  StreamingWriter(WritePlan plan, ByteSink& sink) : plan_(std::move(plan)), sink_(sink) {}

  // Emits the prefix and header. Must be called once, first.
  Status Begin();
  // Tensor bytes in plan order; a chunk may span several tensors. Guarantee: the sink receives the
  // caller's own span (no copy, no split), so a sink may rely on its address.
  Status Write(std::span<const uint8_t> bytes);
  // Index into plan().tensors of the tensor the next byte belongs to (tensors.size() when complete),
  // and how many bytes that tensor still needs: edges that take data per tensor check against these.
  size_t current_tensor() const;
  uint64_t current_tensor_remaining() const;
  // The sink's zero-copy path (see ByteSink::Lend), limited to the bytes still planned.
  std::span<uint8_t> Lend(size_t max);
  Status Commit(size_t filled);
  // n tensor bytes the caller put in the output itself, after everything this writer gave the sink (an edge that
  // forwards unchanged tensors from its input straight to its output): counted, not written.
  Status Forwarded(uint64_t n);
  // Fails with InvalidArgument unless every planned byte was written.
  Status Finish();

  const WritePlan& plan() const { return plan_; }
  uint64_t data_written() const { return written_; }

 private:
  WritePlan plan_;
  ByteSink& sink_;
  bool begun_ = false;
  uint64_t written_ = 0;
};

}  // namespace pb
