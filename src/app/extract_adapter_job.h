// `extract`: the adapter that turns a base into a tuned model, as a job (job/job.h, docs/jobs.md), the one
// sequence the native CLI, the npm CLI and the JS API run. The common steps (plan, policy, plan told, config,
// summary) are app/adapter_folder_job.h's; the work between them is extract's, run by compose::ExtractJob:
//   - the byte ranges it asks for, module by module, read from the base's or the tuned model's shards, with
//     progress through the bytes of both models (no one input named);
//   - adapter_model.safetensors' data, written after a reserved header region as each module is made;
//   - the header, written last at offset 0 into the region reserved for it (why writes carry an offset).
// Input i < base.size() is the base's shard i; input base.size() + j is the tuned model's shard j.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/adapter_folder_job.h"
#include "compose/extract_job.h"
#include "compose/extract_plan.h"

namespace pb::app {

struct ExtractJobOptions {
  compose::ExtractOptions extract;                 // its tables, when given, outlive the job
  std::vector<compose::ExtractShard> base, tuned;  // the models' shards; their headers outlive the job
  std::optional<std::string> base_config, tuned_config;
  AdapterFolderOptions folder;
};

// The extraction `extract` asks for on `line` (the grammar has checked it), but the naming tables (the front end's).
Result<compose::ExtractOptions> ExtractOptionsFromLine(const CommandLine& line);

class ExtractAdapterJob final : public AdapterFolderJob {
 public:
  explicit ExtractAdapterJob(ExtractJobOptions options);
  ~ExtractAdapterJob() override;
  // After the first step: the plan.
  const compose::ExtractPlan* plan() const { return plan_ ? &*plan_ : nullptr; }

 private:
  Status Plan() override;
  std::string PlanText(bool dry_run) const override;
  std::string Summary(bool json, bool dry_run) const override;
  Result<WorkStep> Work() override;
  Status SupplyWork(std::span<const uint8_t> bytes) override;
  const std::string& ConfigText() const override { return outcome_->config_text; }

  ExtractJobOptions options_;
  std::optional<compose::ExtractPlan> plan_;
  WriteBuffer buffer_;  // the data the engine wrote during the last supply
  std::unique_ptr<compose::ExtractJob> engine_;
  std::optional<compose::ExtractOutcome> outcome_;
  uint64_t data_written_ = 0;
  bool write_pending_ = false, progress_pending_ = false;
};

}  // namespace pb::app
