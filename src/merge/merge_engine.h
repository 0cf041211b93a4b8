// The streaming merge of one safetensors file (one shard): the output header first, then every tensor as
// its source bytes arrive, merged row block by row block. Memory: one row block in and out (about a MiB), the
// current module's factors in fp32 (F32 ones as fetched; a large B one block of rows at a time, see below), and
// - only for DoRA on a Conv1D or embedding weight, whose norms run across rows - that one weight in fp32.
//
// Adapter tensors that are references (read from the adapter's header only) are fetched per planned tensor:
// before a merged tensor's base bytes are used, the merger asks for its module's factors (adapter_needs(): A,
// B, magnitude, coalesced where adjacent in the file) and the edge supplies them (SupplyAdapter). Base bytes
// pushed while the merger waits are kept (at most what one Push brought) and used once the factors are in. So
// the adapter bytes held at once are bounded by the largest module's factors (peak_adapter_bytes()). A module
// whose B is larger than MergeOptions::factor_block_bytes (a weight stored [out, in]: B [out, r] is contiguous by
// rows) is fetched as A (and magnitude), then one block of B's rows at a time as the weight's rows arrive: the
// merger stops at the first row whose block is not in, asks for it (adapter_needs()) and keeps the rest of the
// push, so such a module holds A plus one block. F32 factors are used as fetched, without an fp32 copy.
//
// With --quantize (MergeOptions::quantize), a weight the plan marks quantized leaves through a
// QuantizedTensorWriter (merge/quantize_stream.h): its rows in the output dtype in, its quantized layout out.
#pragma once

#include <memory>
#include <vector>

#include "adapter/tensor_fetch.h"
#include "core/reader.h"
#include "merge/merge_plan.h"
#include "merge/merge_regions.h"
#include "merge/quantize_stream.h"

namespace pb::merge {

// A shard's source bytes as an edge reads them: file ranges in push order (adjacent tensors of the same kind
// coalesced), each either pushed through ShardMerger::Push or - a run of tensors the merge copies unchanged -
// forwarded by the edge from its input to its output itself, the merger told only how many bytes went by
// (ShardMerger::Forwarded). So the bytes of tensors the adapter does not touch never need to enter the
// merger's memory (in WASM, the heap): the merger sees only the tensors that change.
struct SourceRun {
  uint64_t begin = 0, end = 0;  // absolute offsets in the shard's file
  bool forward = false;
};
// `range`: the runs of one region's tensors only (merge/merge_regions.h).
std::vector<SourceRun> SourceRuns(const ShardPlan& plan, const Header& header, const MergeOptions& options,
                                  TensorRange range = {});

class ShardMerger final : public adapter::AdapterBytesConsumer {
 public:
  ShardMerger(const ShardPlan& plan, const MergeOptions& options, ByteSink& sink);
  // One region of the shard (merge/merge_regions.h): only tensors [range.first, range.last) - their source
  // bytes in, their output data bytes out (no header: those bytes belong at RegionOutputOf(plan, range)'s
  // data_begin). Regions of one plan may be merged at once, each by its own merger.
  ShardMerger(const ShardPlan& plan, const MergeOptions& options, ByteSink& sink, TensorRange range);
  ~ShardMerger() override;
  Status Begin();
  // The source bytes of the plan's tensors, concatenated in plan order, in chunks of any size. After Begin and
  // after every Push, supply what adapter_needs() lists.
  Status Push(std::span<const uint8_t> bytes);
  // Instead of Push, for the bytes of a run SourceRuns marks `forward`: the caller wrote these n source bytes to
  // the output itself, after everything this merger gave the sink so far. Fails (nothing counted past the
  // error) when they are not all bytes of tensors copied unchanged.
  Status Forwarded(uint64_t n);
  std::span<const adapter::ByteRange> adapter_needs() const override { return fetch_.needs(); }
  Status SupplyAdapter(std::span<const uint8_t> bytes) override;
  // Checks everything was written (the tensors that need no source bytes, additions, come after the last
  // source byte, once their adapter bytes are supplied).
  Status Finish();
  uint64_t source_bytes() const;  // total source bytes the plan expects
  uint64_t source_consumed() const { return consumed_total_; }
  uint64_t peak_adapter_bytes() const { return fetch_.peak_bytes(); }  // adapter bytes held at once, at most
  // --quantize: each quantized weight's dequantization error, in the order they were written.
  const std::vector<QuantError>& quant_errors() const { return quant_errors_; }

 private:
  class TensorState;
  Status StartNext();
  Status FinishCurrent();
  Status PushNow(std::span<const uint8_t> bytes, size_t& used);
  // Until the current tensor's adapter bytes are in: its factors, or (MergeOptions::factor_block_bytes) the next
  // block of its left factor's rows.
  bool waiting() const { return started_ && current_ < last_ && (!state_ || !fetch_.ready()); }
  const ShardPlan& plan_;
  const MergeOptions& options_;
  ByteSink& sink_;
  StreamingWriter writer_;
  size_t first_ = 0, last_ = 0;  // the planned tensors this merger handles (all of them but for a region)
  size_t current_ = 0;
  bool started_ = false;
  uint64_t consumed_total_ = 0;
  uint64_t consumed_in_tensor_ = 0;
  std::unique_ptr<TensorState> state_;
  adapter::TensorFetch fetch_;  // the current tensor's adapter tensors
  bool fetch_requested_ = false;
  std::vector<uint8_t> pending_;  // source bytes pushed while waiting for adapter bytes
  size_t pending_at_ = 0;         // of which the merger has taken this many
  std::vector<QuantError> quant_errors_;
};

// A whole single-file merge from a byte stream in file order: parse the header, plan, then merge as the
// data arrives. For JS TransformStreams and stdin-like sources; the CLI uses ShardMerger with reads.
class StreamingMerger final : private ReaderEvents, public adapter::AdapterBytesConsumer {
 public:
  StreamingMerger(const adapter::Adapter& adapter, std::optional<std::string> base_config, MergeOptions options,
                  ByteSink& sink, ReaderOptions reader_options = {});
  ~StreamingMerger() override;
  Status Feed(std::span<const uint8_t> chunk) { return reader_.Feed(chunk, *this); }
  // The bytes from the stream's current position to the end of the run it is in (SourceRuns; until the header is
  // planned: the rest of the header, or UINT64_MAX while its length is unknown), and whether that run may be
  // forwarded: the edge writes those bytes to the output itself and calls Forwarded, instead of Feed.
  SourceRun NextRun() const;
  Status Forwarded(uint64_t n);
  Status Finish();
  const MergePlan* plan() const { return plan_ ? plan_.get() : nullptr; }
  // As ShardMerger's: after every Feed, supply what is listed.
  std::span<const adapter::ByteRange> adapter_needs() const override;
  Status SupplyAdapter(std::span<const uint8_t> bytes) override;
  uint64_t peak_adapter_bytes() const { return merger_ ? merger_->peak_adapter_bytes() : 0; }
  const std::vector<QuantError>* quant_errors() const { return merger_ ? &merger_->quant_errors() : nullptr; }

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
  std::vector<SourceRun> runs_;  // the plan's, once the header is in
};

}  // namespace pb::merge
