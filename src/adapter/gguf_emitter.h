// Writing a .gguf adapter (GgufOutput) whose tensors may be references into the adapter file being translated:
// the header first (every size is known from the plan), then each tensor fetched when its turn comes, widened
// to fp32 and encoded in its ggml type, then padded. One tensor is held at a time, never the whole adapter.
#pragma once

#include <memory>

#include "adapter/adapter_io.h"
#include "adapter/tensor_fetch.h"
#include "adapter/weights_emitter.h"

namespace pb::adapter {

class GgufEmitter final : public WeightsEmitter {
 public:
  GgufEmitter(const GgufOutput& output, ByteSink& sink) : output_(output), sink_(sink) {}
  // Plans and writes the header, then every tensor up to the first reference.
  Status Begin() override;
  std::span<const ByteRange> adapter_needs() const override { return fetch_.needs(); }
  Status SupplyAdapter(std::span<const uint8_t> bytes) override;
  // Checks that every tensor was written.
  Status Finish() override;
  uint64_t file_size() const { return layout_.file_size; }

 private:
  Status Advance();
  Status WriteTensor(size_t index, const Tensor& tensor);
  const GgufOutput& output_;
  ByteSink& sink_;
  gguf::GgufLayout layout_;
  bool begun_ = false;
  TensorFetch fetch_;
  size_t next_ = 0;
  bool requested_ = false;
};

// Writes a GgufOutput whose tensors are all held (tests, and outputs made in memory).
Status EmitGguf(const GgufOutput& output, ByteSink& sink);

}  // namespace pb::adapter
