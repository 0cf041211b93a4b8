// What `create` and `extract` share as jobs (job/job.h, docs/jobs.md): both plan an adapter from models whose
// headers the front end opened, then write one adapter folder (adapter_model.safetensors, adapter_config.json).
// Their common sequence is written here once:
//   1. the plan (the command's own);
//   2. the input-link check, and with --dry-run nothing else: the summary is the plan;
//   3. the output policy (app/output_policy.h) on the facts the front end gathered, then an empty write to the
//      weights, so that the executor opens the output folder (and reports one it cannot make) before the plan is told;
//   4. the plan told as a message, unless --json or --quiet;
//   5. the command's work: its reads, the weights' writes (output 0) and its progress;
//   6. adapter_config.json (output 1), written whole;
//   7. done: the summary (the outcome text, or the JSON document under --json) is ready for after the commit.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/command_job.h"
#include "app/command_line.h"
#include "app/create_report.h"
#include "app/output_policy.h"
#include "core/writer.h"
#include "job/job.h"

namespace pb::app {

// The outputs of an adapter folder job, in the order of the job's output indices.
inline constexpr size_t kAdapterWeightsOutput = 0, kAdapterConfigOutput = 1;

struct AdapterFolderOptions {
  bool json = false;     // the summary is the JSON document (--json)
  bool quiet = false;    // no plan told, no text summary (-q)
  bool dry_run = false;  // plan only: no output, nothing read
  // The output policy's facts, gathered by the front end: the inputs (links are checked even for --dry-run), and
  // the output folder (none with --dry-run).
  std::vector<InputFact> inputs;
  std::optional<OutputRequest> out;
  OutputFlags flags;
};

// --json, -q, --dry-run, --force and --follow-links of a `create` or `extract` line (the facts are the front end's).
AdapterFolderOptions AdapterFolderOptionsFromLine(const CommandLine& line);

// --arch, and what the config names as the base (--base as given; `owner/repo` and the revision of an hf:// base):
// the options `create` and `extract` take alike (compose::CreateOptions, compose::ExtractOptions).
template <typename Options>
void NameBaseFromLine(const CommandLine& line, Options& options) {
  options.arch = line.Value("arch");
  const CreateBaseName base_name = CreateBaseNameOf(*line.Value("base"));
  options.base_name_or_path = base_name.name;
  options.revision = base_name.revision;
}

// Collects what a core writer writes during one call into the job, for the next kWrite step.
class WriteBuffer final : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> bytes) override;
  std::span<const uint8_t> bytes() const { return bytes_; }
  void Clear() { bytes_.clear(); }

 private:
  std::vector<uint8_t> bytes_;
};

class AdapterFolderJob : public CommandJob {
 public:
  // After the policy check: its plan for the output folder (empty before, and with --dry-run).
  const OutputPlan& output_plan() const override { return output_plan_; }
  // adapter_model.safetensors and adapter_config.json, the outputs' names in output order.
  std::vector<std::string> output_names() const override { return names_; }
  // At kDone: what the command prints once its output is in place ("" under -q without --json).
  const std::string& summary() const override { return summary_; }

 protected:
  AdapterFolderJob(std::string_view command, std::vector<std::string> names, AdapterFolderOptions options);
  const AdapterFolderOptions& options() const { return options_; }

  virtual Status Plan() = 0;
  virtual std::string PlanText(bool dry_run) const = 0;
  // The summary after the work (json: the JSON document), or of the plan alone with --dry-run.
  virtual std::string Summary(bool json, bool dry_run) const = 0;
  // The next step of the work (reads of the inputs, writes to the weights, progress); nullopt once the weights
  // are complete.
  using WorkStep = std::optional<job::Step>;
  virtual Result<WorkStep> Work() = 0;
  // The bytes of the work's last read (a prefix of it; empty: the input ended).
  virtual Status SupplyWork(std::span<const uint8_t> bytes) = 0;
  // adapter_config.json, once the work is done.
  virtual const std::string& ConfigText() const = 0;

 private:
  enum class Phase : uint8_t { kPlan, kTell, kWork, kConfig, kDone };
  Result<job::Step> Advance() final;
  Status Accept(std::span<const uint8_t> bytes) final;

  std::string command_;
  std::vector<std::string> names_;
  AdapterFolderOptions options_;
  Phase phase_ = Phase::kPlan;
  OutputPlan output_plan_;
  std::string plan_text_, summary_;
};

// "source ended at byte N, inside a tensor": an input shorter than its header said.
Error InputEndedInsideTensor(uint64_t at);

}  // namespace pb::app
