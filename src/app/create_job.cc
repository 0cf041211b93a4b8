#include "app/create_job.h"

namespace pb::app {

Result<compose::CreateOptions> CreateOptionsFromLine(const CommandLine& line) {
  PB_ASSIGN_OR_RETURN(compose::CreateOptions options, compose::ParseCreateArguments(CreateArgumentsOf(line)));
  NameBaseFromLine(line, options);
  return options;
}

CreateJob::CreateJob(CreateJobOptions options)
    : AdapterFolderJob("create", {std::string(compose::kCreateWeightsName), std::string(compose::kCreateConfigName)},
                       options.folder),
      options_(std::move(options)) {}

Status CreateJob::Plan() {
  PB_ASSIGN_OR_RETURN(auto plan, compose::PlanCreate(options_.shards, options_.base_config, options_.create));
  plan_ = std::move(plan);
  return Status::Ok();
}

std::string CreateJob::PlanText(bool dry_run) const { return RenderCreatePlanText(*plan_, dry_run); }

std::string CreateJob::Summary(bool json, bool dry_run) const {
  return json ? RenderCreateJson(*plan_, dry_run) : RenderCreateOutcomeText(*plan_);
}

job::Step CreateJob::WriteBuffered() {
  const job::Step step = job::Step::Write(kAdapterWeightsOutput, write_at_, buffer_.bytes());
  write_at_ += buffer_.bytes().size();
  return step;
}

Result<AdapterFolderJob::WorkStep> CreateJob::Work() {
  if (!magnitudes_) magnitudes_ = std::make_unique<compose::MagnitudePass>(*plan_);
  if (progress_pending_) {
    progress_pending_ = false;
    return WorkStep(job::Step::Progress(magnitudes_->ranges()[range_].shard, read_, magnitudes_->total_bytes()));
  }
  // DoRA: the targeted weights, streamed through the magnitude pass.
  const auto& ranges = magnitudes_->ranges();
  for (; range_ < ranges.size(); ++range_, filled_ = 0) {
    const auto& r = ranges[range_];
    if (filled_ == r.end - r.begin) continue;
    if (shown_ != r.shard) {  // a shard's first bytes: its progress line starts where the work is
      shown_ = r.shard;
      return WorkStep(job::Step::Progress(r.shard, read_, magnitudes_->total_bytes()));
    }
    return WorkStep(job::Step::Read(r.shard, r.begin + filled_, r.end));
  }
  // Then the weights: the header, each tensor in file order, and what the writer ends with.
  buffer_.Clear();
  if (!emitter_) {
    emitter_ = std::make_unique<compose::AdapterEmitter>(*plan_, magnitudes_->TakeNorms(), buffer_);
    PB_RETURN_IF_ERROR(emitter_->Begin());
    return WorkStep(WriteBuffered());
  }
  while (!finished_) {
    PB_ASSIGN_OR_RETURN(bool more, emitter_->Next());
    if (!more) {
      PB_RETURN_IF_ERROR(emitter_->Finish());
      finished_ = true;
    }
    if (!buffer_.bytes().empty()) return WorkStep(WriteBuffered());
  }
  return WorkStep();
}

Status CreateJob::SupplyWork(std::span<const uint8_t> bytes) {
  const auto& r = magnitudes_->ranges()[range_];
  if (bytes.empty()) return InputEndedInsideTensor(r.begin + filled_);
  PB_RETURN_IF_ERROR(magnitudes_->Push(bytes));
  filled_ += bytes.size();
  read_ += bytes.size();
  progress_pending_ = true;
  return Status::Ok();
}

}  // namespace pb::app
