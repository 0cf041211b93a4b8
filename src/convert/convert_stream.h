// Dtype conversion of a whole safetensors file, streaming and push-based.
//
// A ConversionPlan decides the output layout from the input header: every tensor whose dtype the
// kernels handle (F16, BF16, F32, F64, F8_E4M3, F8_E5M2) becomes the target dtype, the rest are copied
// unchanged, and metadata is kept. TensorBytesConverter then takes the source tensors' bytes in the
// plan's order, in chunks of any size, and pushes converted output to a sink.
//
// Two orders: kInput keeps the source's data order, so a pure stream works (StreamingConverter);
// kReference reorders as the Rust serializer does, which needs a random-access source: the edge reads
// each planned tensor's source range (pread, Blob.slice…) and pushes it.
#pragma once

#include <memory>
#include <vector>

#include "core/reader.h"
#include "core/writer.h"

namespace pb {

struct ConversionPlan {
  WritePlan write;
  std::vector<size_t> source_tensor;  // per planned tensor: its index in the source header
  std::vector<Dtype> source_dtype;    // per planned tensor
  std::vector<Dtype> target_dtype;    // per planned tensor
  size_t converted_count = 0;         // tensors whose dtype changes
};

Result<ConversionPlan> PlanConversion(const Header& source, Dtype target, TensorOrder order);

class TensorBytesConverter {
 public:
  TensorBytesConverter(ConversionPlan plan, ByteSink& sink);
  Status Begin();
  // Source tensor bytes, concatenated in plan order.
  Status Push(std::span<const uint8_t> bytes);
  Status Finish();
  const ConversionPlan& plan() const { return plan_; }

 private:
  void AdvanceToNonEmpty();
  ConversionPlan plan_;
  StreamingWriter writer_;
  size_t current_ = 0;     // planned tensor being filled
  uint64_t consumed_ = 0;  // source bytes consumed of the current tensor
  uint8_t carry_[8] = {};  // a source element split across two pushes
  size_t carry_len_ = 0;
  std::vector<uint8_t> block_;  // bounded output staging buffer
};

// Input-order conversion of a byte stream: feed the source file's bytes, get the converted file.
class StreamingConverter : private ReaderEvents {
 public:
  StreamingConverter(Dtype target, ByteSink& sink, ReaderOptions options = {})
      : target_(target), sink_(sink), reader_(options) {}
  Status Feed(std::span<const uint8_t> chunk) { return reader_.Feed(chunk, *this); }
  Status Finish();
  const Header* header() const { return reader_.header(); }
  const ConversionPlan* plan() const { return converter_ ? &converter_->plan() : nullptr; }

 private:
  Status OnHeader(const Header& header) override;
  Status OnTensorData(size_t tensor, uint64_t offset, std::span<const uint8_t> bytes) override;
  Dtype target_;
  ByteSink& sink_;
  StreamingReader reader_;
  std::unique_ptr<TensorBytesConverter> converter_;
};

}  // namespace pb
