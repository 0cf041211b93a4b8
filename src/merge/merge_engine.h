// The streaming merge of one safetensors file (one shard): the output header first, then every tensor as
// its source bytes arrive, merged row block by row block. Memory: one row block in and out (about a MiB), the
// current module's factors in fp32, and - only for DoRA on a Conv1D or embedding weight, whose norms run
// across rows - that one weight in fp32.
#pragma once

#include <memory>
#include <vector>

#include "core/reader.h"
#include "merge/merge_plan.h"

namespace pb::merge {

class ShardMerger {
 public:
  ShardMerger(const ShardPlan& plan, const MergeOptions& options, ByteSink& sink);
  ~ShardMerger();
  Status Begin();
  // The source bytes of the plan's tensors, concatenated in plan order, in chunks of any size.
  Status Push(std::span<const uint8_t> bytes);
  // Emits the tensors that need no source bytes (additions) and checks everything was written.
  Status Finish();
  uint64_t source_bytes() const;  // total source bytes the plan expects
  uint64_t source_consumed() const { return consumed_total_; }

 private:
  class TensorState;
  Status StartNext();
  Status FinishCurrent();
  const ShardPlan& plan_;
  const MergeOptions& options_;
  ByteSink& sink_;
  StreamingWriter writer_;
  size_t current_ = 0;
  bool started_ = false;
  uint64_t consumed_total_ = 0;
  uint64_t consumed_in_tensor_ = 0;
  std::unique_ptr<TensorState> state_;
};

// A whole single-file merge from a byte stream in file order: parse the header, plan, then merge as the
// data arrives. For JS TransformStreams and stdin-like sources; the CLI uses ShardMerger with reads.
class StreamingMerger : private ReaderEvents {
 public:
  StreamingMerger(const adapter::Adapter& adapter, std::optional<std::string> base_config, MergeOptions options,
                  ByteSink& sink, ReaderOptions reader_options = {});
  ~StreamingMerger() override;
  Status Feed(std::span<const uint8_t> chunk) { return reader_.Feed(chunk, *this); }
  Status Finish();
  const MergePlan* plan() const { return plan_ ? plan_.get() : nullptr; }

 private:
  Status OnHeader(const Header& header) override;
  Status OnTensorData(size_t tensor, uint64_t offset, std::span<const uint8_t> bytes) override;
  const adapter::Adapter& adapter_;
  std::optional<std::string> base_config_;
  MergeOptions options_;
  ByteSink& sink_;
  StreamingReader reader_;
  std::unique_ptr<MergePlan> plan_;
  std::unique_ptr<ShardMerger> merger_;
};

}  // namespace pb::merge
