// merge::DefaultMergeThreads: the thread count the native CLI uses without --threads. Every core where the
// low-rank products are at least half the estimated work, else a thread per shard (up to the cores), and never
// more threads than keep the factors the regions hold whole at once (A in fp32, per thread) within
// kDefaultFactorBudget. And merge::DefaultWorkerThreads, the npm CLI's.
#include <gtest/gtest.h>

#include <deque>

#include "merge/merge_regions.h"

namespace pb::merge {
namespace {

class DefaultThreads : public ::testing::Test {
 protected:
  // A BF16 [out, in] weight merged with a rank-`rank` LoRA, or copied when rank is 0.
  PlannedTensor Weight(uint64_t out, uint64_t in, uint64_t rank) {
    PlannedTensor p;
    p.source = 0;
    p.in_dtype = p.out_dtype = Dtype::BF16;
    p.shape = {out, in};
    p.rows = out;
    p.cols = in;
    if (rank == 0) return p;
    adapter::LoraModule& m = modules_.emplace_back();
    m.a.shape = {rank, in};
    m.b.shape = {out, rank};
    p.op = TensorOp::kLowRank;
    p.module = &m;
    return p;
  }
  MergePlan Plan(std::vector<PlannedTensor> tensors) {
    MergePlan plan;
    plan.shards.push_back({"model.safetensors", std::move(tensors), {}});
    return plan;
  }
  std::deque<adapter::LoraModule> modules_;  // stable addresses for the plans' module pointers
};

TEST_F(DefaultThreads, CopyingBoundMergesUseOneThread) {
  // r = 16 on one of four 4096 x 4096 weights: the products are a small part of the bytes moved.
  MergePlan plan = Plan({Weight(4096, 4096, 16), Weight(4096, 4096, 0), Weight(4096, 4096, 0), Weight(4096, 4096, 0)});
  EXPECT_EQ(DefaultMergeThreads(plan, 8), 1u);
}

TEST_F(DefaultThreads, CopyingBoundMergesOfSeveralShardsUseAThreadPerShard) {
  MergePlan plan = Plan({Weight(4096, 4096, 16), Weight(4096, 4096, 0)});
  plan.shards.push_back({"model-00002-of-00003.safetensors", {Weight(4096, 4096, 0)}, {}});
  EXPECT_EQ(DefaultMergeThreads(plan, 8), 2u);
  EXPECT_EQ(DefaultMergeThreads(plan, 1), 1u);
  plan.shards.push_back({"model-00003-of-00003.safetensors", {Weight(4096, 4096, 0)}, {}});
  EXPECT_EQ(DefaultMergeThreads(plan, 8), 3u);
  EXPECT_EQ(DefaultMergeThreads(plan, 2), 2u);
  // Still within the factors' memory bound: r = 2048 holds 32 MiB of A per thread.
  MergePlan huge =
      Plan({Weight(4096, 4096, 2048), Weight(4096, 4096, 0), Weight(4096, 4096, 0), Weight(4096, 4096, 0)});
  huge.shards.push_back({"model-00002-of-00002.safetensors", {Weight(4096, 4096, 0), Weight(4096, 4096, 0)}, {}});
  EXPECT_EQ(DefaultMergeThreads(huge, 8), 1u);
}

TEST_F(DefaultThreads, ComputeBoundMergesUseEveryCore) {
  // r = 256 on every weight: A is 256 x 4096 x 4 = 4 MiB, 8 of them fit the budget.
  MergePlan plan = Plan({Weight(4096, 4096, 256), Weight(4096, 4096, 256)});
  EXPECT_EQ(DefaultMergeThreads(plan, 2), 2u);
  EXPECT_EQ(DefaultMergeThreads(plan, 8), 8u);
  EXPECT_EQ(DefaultMergeThreads(plan, 64), kDefaultFactorBudget / (256 * 4096 * 4));
}

TEST_F(DefaultThreads, HugeRanksAreBoundByTheFactorsHeld) {
  // r = 2048: A is 32 MiB, as large as the whole budget: one thread whatever the cores.
  MergePlan plan = Plan({Weight(4096, 4096, 2048), Weight(4096, 4096, 2048)});
  EXPECT_EQ(DefaultMergeThreads(plan, 2), 1u);
  // r = 1024 (16 MiB): two.
  MergePlan half = Plan({Weight(4096, 4096, 1024), Weight(4096, 4096, 1024)});
  EXPECT_EQ(DefaultMergeThreads(half, 8), 2u);
  // An embedding-shaped weight counts its longer side (A is r x vocab there).
  MergePlan embedding = Plan({Weight(32000, 4096, 512)});
  EXPECT_EQ(DefaultMergeThreads(embedding, 8), 1u);
}

// merge::DefaultWorkerThreads, the npm CLI's: a worker thread plans again in a module instance of its own, so
// only merges where the module's work dominates (compute-bound, or quantizing) take more than one.
TEST_F(DefaultThreads, WorkerThreadsOnlyWhereTheModulesWorkDominates) {
  MergePlan copying = Plan({Weight(4096, 4096, 16), Weight(4096, 4096, 0)});
  copying.shards.push_back({"model-00002-of-00002.safetensors", {Weight(4096, 4096, 0)}, {}});
  EXPECT_EQ(DefaultMergeThreads(copying, 8), 2u);
  EXPECT_EQ(DefaultWorkerThreads(copying, 8), 1u);
  copying.quantize.emplace();
  EXPECT_EQ(DefaultWorkerThreads(copying, 8), 2u);
  MergePlan computing = Plan({Weight(4096, 4096, 256), Weight(4096, 4096, 256)});
  EXPECT_EQ(DefaultWorkerThreads(computing, 8), 8u);
  EXPECT_EQ(DefaultWorkerThreads(computing, 1), 1u);
}

TEST_F(DefaultThreads, NothingMergedIsOneThread) {
  EXPECT_EQ(DefaultMergeThreads(Plan({}), 8), 1u);
  EXPECT_EQ(DefaultMergeThreads(Plan({Weight(64, 64, 0)}), 8), 1u);
}

}  // namespace
}  // namespace pb::merge
