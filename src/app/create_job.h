// `create`: a fresh adapter for a base as a job (job/job.h, docs/jobs.md), the one sequence the native CLI, the
// npm CLI and the JS API run. The common steps (plan, policy, plan told, config, summary) are
// app/adapter_folder_job.h's; the work between them is create's:
//   - DoRA: each targeted weight of the base read in plan order (the magnitude pass, compose/create_writer.h),
//     with progress through the base's bytes, named by the shard being read; without DoRA nothing is read;
//   - adapter_model.safetensors written in order: its header, then one tensor at a time (at most one held).
// Input i is the base's shard i (whose header the front end opened and passes in the options).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/adapter_folder_job.h"
#include "compose/create_plan.h"
#include "compose/create_writer.h"

namespace pb::app {

struct CreateJobOptions {
  compose::CreateOptions create;             // the adapter asked for (its tables, when given, outlive the job)
  std::vector<compose::CreateShard> shards;  // the base's shards; their headers outlive the job
  std::optional<std::string> base_config;    // the base's config.json text
  AdapterFolderOptions folder;
};

// The adapter `create` asks for on `line` (the grammar has checked it), but the naming tables (the front end's).
Result<compose::CreateOptions> CreateOptionsFromLine(const CommandLine& line);

class CreateJob final : public AdapterFolderJob {
 public:
  explicit CreateJob(CreateJobOptions options);
  // After the first step: the plan.
  const compose::CreatePlan* plan() const { return plan_ ? &*plan_ : nullptr; }

 private:
  Status Plan() override;
  std::string PlanText(bool dry_run) const override;
  std::string Summary(bool json, bool dry_run) const override;
  Result<WorkStep> Work() override;
  Status SupplyWork(std::span<const uint8_t> bytes) override;
  const std::string& ConfigText() const override { return plan_->config_text; }
  job::Step WriteBuffered();

  CreateJobOptions options_;
  std::optional<compose::CreatePlan> plan_;
  std::unique_ptr<compose::MagnitudePass> magnitudes_;
  size_t range_ = 0;             // the DoRA range being read
  uint64_t filled_ = 0;          // its bytes so far
  uint64_t read_ = 0;            // DoRA bytes through (progress)
  std::optional<size_t> shown_;  // the shard the progress names
  bool progress_pending_ = false;
  WriteBuffer buffer_;
  std::unique_ptr<compose::AdapterEmitter> emitter_;
  bool finished_ = false;
  uint64_t write_at_ = 0;
};

}  // namespace pb::app
