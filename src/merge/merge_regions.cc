#include "merge/merge_regions.h"

#include <algorithm>

namespace pb::merge {

namespace {

// The WritePlan entries a planned tensor produces (merge_plan.cc writes them in this order).
size_t WriteEntriesOf(const PlannedTensor& p) {
  if (!p.quantized) return 1;
  return p.quantized->shape.empty() ? 2 : 3;
}

// A low-rank product costs about 2·rank flops per element; at 1 cost unit per 8 rank-elements, a BF16 weight
// (4 bytes moved per element) merged at r = 32 costs twice its copy. Checked against a profile: docs/benchmarks.md,
// "Native CLI threads".
constexpr uint64_t kRankElementsPerUnit = 8;

}  // namespace

RegionOutput RegionOutputOf(const ShardPlan& plan, TensorRange range) {
  const size_t last = std::min(range.last, plan.tensors.size()), first = std::min(range.first, last);
  RegionOutput out;
  size_t w = 0;
  for (size_t i = 0; i < first; ++i) w += WriteEntriesOf(plan.tensors[i]);
  out.write_first = w;
  for (size_t i = first; i < last; ++i) w += WriteEntriesOf(plan.tensors[i]);
  out.write_last = std::min(w, plan.write.tensors.size());
  out.write_first = std::min(out.write_first, out.write_last);
  const auto& t = plan.write.tensors;
  out.data_begin = out.write_first < t.size() ? t[out.write_first].begin : plan.write.data_size;
  out.data_end = out.write_last > out.write_first ? t[out.write_last - 1].end : out.data_begin;
  return out;
}

WritePlan RegionWritePlan(const ShardPlan& plan, TensorRange range) {
  const RegionOutput r = RegionOutputOf(plan, range);
  WritePlan w;
  for (size_t i = r.write_first; i < r.write_last; ++i) {
    pb::PlannedTensor t = plan.write.tensors[i];
    t.begin -= r.data_begin;
    t.end -= r.data_begin;
    w.tensors.push_back(t);
  }
  w.data_size = r.data_end - r.data_begin;
  return w;
}

uint64_t SourceBytesOf(const PlannedTensor& p) {
  if (!p.source) return 0;
  uint64_t n = 1;
  for (uint64_t d : p.shape) n *= d;
  return n * DtypeBits(p.in_dtype) / 8;
}

uint64_t LowRankCostOf(const PlannedTensor& p) {
  switch (p.op) {
    case TensorOp::kLowRank:
    case TensorOp::kLowRankEmbedding:
    case TensorOp::kLowRankExperts:
    case TensorOp::kDoraRows:
    case TensorOp::kDoraColumns: {
      if (!p.module) return 0;
      uint64_t elements = 1;
      for (uint64_t d : p.shape) elements *= d;
      return elements * p.module->rank() / kRankElementsPerUnit;
    }
    default: return 0;
  }
}

uint64_t MergeCostOf(const PlannedTensor& p) {
  uint64_t elements = 1;
  for (uint64_t d : p.shape) elements *= d;
  return SourceBytesOf(p) + elements * DtypeBits(p.out_dtype) / 8 + LowRankCostOf(p);
}

namespace {

// The largest factor merging `p` holds whole, in fp32: rank x its longer dimension (A is r x in for a weight,
// r x vocab for an embedding), an upper bound whatever the orientation.
uint64_t WholeFactorBytesOf(const PlannedTensor& p) {
  if (LowRankCostOf(p) == 0 || p.shape.empty()) return 0;
  uint64_t longest = 0;
  for (uint64_t d : p.shape) longest = std::max(longest, d);
  return uint64_t{p.module->rank()} * longest * sizeof(float);
}

}  // namespace

namespace {

// Whether the low-rank products are at least half the estimated work.
bool ComputeBound(const MergePlan& plan) {
  uint64_t all = 0, products = 0;
  for (const auto& shard : plan.shards)
    for (const auto& t : shard.tensors) {
      all += MergeCostOf(t);
      products += LowRankCostOf(t);
    }
  return products > 0 && products * 2 >= all;
}

}  // namespace

size_t DefaultMergeThreads(const MergePlan& plan, size_t cores) {
  uint64_t factor = 0;
  for (const auto& shard : plan.shards)
    for (const auto& t : shard.tensors) factor = std::max(factor, WholeFactorBytesOf(t));
  // Copying one file does not get faster with more threads, but the files of several shards do, one per thread.
  const uint64_t useful = ComputeBound(plan) ? cores : std::min<uint64_t>(cores, plan.shards.size());
  const uint64_t by_memory = factor == 0 ? cores : std::max<uint64_t>(1, kDefaultFactorBudget / factor);
  return static_cast<size_t>(std::max<uint64_t>(1, std::min(useful, by_memory)));
}

size_t DefaultWorkerThreads(const MergePlan& plan, size_t cores) {
  const bool module_work_dominates = ComputeBound(plan) || plan.quantize.has_value();
  return module_work_dominates ? DefaultMergeThreads(plan, cores) : 1;
}

std::vector<TensorRange> SplitIntoRegions(const ShardPlan& plan, size_t pieces) {
  const size_t n = plan.tensors.size();
  pieces = std::max<size_t>(1, std::min(pieces, n));
  uint64_t total = 0;
  for (const auto& p : plan.tensors) total += MergeCostOf(p);
  std::vector<TensorRange> regions;
  size_t first = 0;
  uint64_t before = 0, in_region = 0;  // cost of the regions closed so far, and of the open one
  for (size_t i = 0; i < n; ++i) {
    in_region += MergeCostOf(plan.tensors[i]);
    // Close the region once it reaches its share of what is left, leaving a tensor for each region still to come.
    const size_t left = pieces - regions.size();
    const uint64_t share = (total - before + left - 1) / left;
    if (left > 1 && in_region >= share && n - (i + 1) >= left - 1) {
      regions.push_back({first, i + 1});
      first = i + 1;
      before += in_region;
      in_region = 0;
    }
  }
  regions.push_back({first, n});
  return regions;
}

}  // namespace pb::merge
