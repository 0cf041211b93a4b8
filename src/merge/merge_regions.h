// A shard's merge split into regions: contiguous runs of its planned tensors that independent ShardMergers
// (merge_engine.h, constructed with a TensorRange) can merge at once, each writing only its tensors' output
// bytes, which belong at a known place in the output file: the output header (plan.write.header) is fixed
// before any data, so every tensor's output offset is known from the plan. Sans-I/O: the edge owns the threads,
// the reads and the positional writes (the native CLI, cli/merge_command.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "merge/merge_plan.h"

namespace pb::merge {

// Planned tensors [first, last) of a ShardPlan (last is clamped to the plan's size).
struct TensorRange {
  size_t first = 0;
  size_t last = SIZE_MAX;
};

// Where a region's output goes: bytes [data_begin, data_end) of the output's data section (add
// plan.write.header.size() for the file offset), and the WritePlan entries [write_first, write_last) its
// tensors produce (one per tensor; two or three for a weight written quantized).
struct RegionOutput {
  uint64_t data_begin = 0, data_end = 0;
  size_t write_first = 0, write_last = 0;
};
RegionOutput RegionOutputOf(const ShardPlan& plan, TensorRange range);

// The WritePlan a region's merger writes through: no header, the region's entries with offsets relative to
// data_begin, data_size = data_end - data_begin.
WritePlan RegionWritePlan(const ShardPlan& plan, TensorRange range);

// The source bytes planned tensor `p` takes (0 for an addition), and a rough cost of merging it in bytes moved
// (source plus output bytes, plus the low-rank product's work per element, which dominates at large ranks).
uint64_t SourceBytesOf(const PlannedTensor& p);
uint64_t MergeCostOf(const PlannedTensor& p);
// The low-rank product's part of MergeCostOf (0 for a tensor that is copied, converted or replaced).
uint64_t LowRankCostOf(const PlannedTensor& p);

// How many threads a merge uses when --threads is not given, on a machine of `cores`: every core when the
// low-rank products are at least half the estimated work, else one per shard up to the cores (copying one file
// does not get faster with more threads: its writes take its lock in turn; the files of several shards, written
// at once, do: docs/benchmarks.md, "Native CLI: the kernel copies unchanged tensors"); and never more than keep the
// regions hold whole at once (A, r x in in fp32, per thread) within kDefaultFactorBudget, so that a default merge
// with a huge-rank adapter stays in bounded memory (docs/benchmarks.md, "Native merge with a 1 GB adapter").
inline constexpr uint64_t kDefaultFactorBudget = 32ull << 20;
size_t DefaultMergeThreads(const MergePlan& plan, size_t cores);

// The npm CLI's default: its threads are worker threads, each with a module instance of its own that plans the
// merge again (0.3-0.4 s of CPU more than one thread for a two-shard 1.74 GB model on 2 cores), and it copies
// unchanged shards whole in the kernel with one thread anyway; so DefaultMergeThreads where the module's own work
// dominates (the low-rank products are at least half the work, or the merge quantizes), else one thread
// (docs/benchmarks.md, "npm CLI: shards on worker threads").
size_t DefaultWorkerThreads(const MergePlan& plan, size_t cores);

// Splits the plan's tensors into at most `pieces` contiguous regions of about equal cost (a tensor is never
// split, so one large tensor may be a region on its own), in file order, covering every tensor. An empty plan
// gives one empty region.
std::vector<TensorRange> SplitIntoRegions(const ShardPlan& plan, size_t pieces);

}  // namespace pb::merge
