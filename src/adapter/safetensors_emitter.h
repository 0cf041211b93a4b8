// Writing a safetensors file whose tensors may be references into the adapter file being translated: the
// header first, then each tensor in order, a referenced one fetched (and rearranged) when its turn comes, so
// translate holds one tensor at a time, never the whole adapter.
#pragma once

#include <memory>

#include "adapter/adapter_io.h"
#include "adapter/tensor_fetch.h"
#include "adapter/weights_emitter.h"

namespace pb::adapter {

class SafetensorsEmitter final : public WeightsEmitter {
 public:
  SafetensorsEmitter(const SafetensorsOutput& output, ByteSink& sink) : output_(output), sink_(sink) {}
  // Plans and writes the header, then every tensor up to the first reference.
  Status Begin() override;
  std::span<const ByteRange> adapter_needs() const override { return fetch_.needs(); }
  Status SupplyAdapter(std::span<const uint8_t> bytes) override;
  // Checks that every tensor was written.
  Status Finish() override;
  uint64_t peak_adapter_bytes() const { return fetch_.peak_bytes(); }

 private:
  Status Advance();
  const SafetensorsOutput& output_;
  ByteSink& sink_;
  std::unique_ptr<StreamingWriter> writer_;
  TensorFetch fetch_;
  size_t next_ = 0;         // position in the write plan
  bool requested_ = false;  // the reference at next_ was requested
};

}  // namespace pb::adapter
