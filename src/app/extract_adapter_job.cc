#include "app/extract_adapter_job.h"

#include <algorithm>

#include "app/extract_report.h"

namespace pb::app {

Result<compose::ExtractOptions> ExtractOptionsFromLine(const CommandLine& line) {
  PB_ASSIGN_OR_RETURN(compose::ExtractOptions options, compose::ParseExtractArguments(ExtractArgumentsOf(line)));
  NameBaseFromLine(line, options);
  return options;
}

ExtractAdapterJob::ExtractAdapterJob(ExtractJobOptions options)
    : AdapterFolderJob("extract", {std::string(compose::kExtractWeightsName), std::string(compose::kExtractConfigName)},
                       options.folder),
      options_(std::move(options)) {}
ExtractAdapterJob::~ExtractAdapterJob() = default;

Status ExtractAdapterJob::Plan() {
  PB_ASSIGN_OR_RETURN(auto plan, compose::PlanExtract(options_.base, options_.tuned, options_.base_config,
                                                      options_.tuned_config, options_.extract));
  plan_ = std::move(plan);
  return Status::Ok();
}

std::string ExtractAdapterJob::PlanText(bool dry_run) const { return RenderExtractPlanText(*plan_, dry_run); }

std::string ExtractAdapterJob::Summary(bool json, bool dry_run) const {
  if (json) return RenderExtractJson(*plan_, dry_run ? nullptr : &*outcome_);
  return RenderExtractOutcomeText(*plan_, *outcome_);
}

Result<AdapterFolderJob::WorkStep> ExtractAdapterJob::Work() {
  if (!engine_) engine_ = std::make_unique<compose::ExtractJob>(*plan_, buffer_);
  if (write_pending_) {  // the data a supply completed, after the reserved header region
    write_pending_ = false;
    const job::Step step =
        job::Step::Write(kAdapterWeightsOutput, plan_->reserved_header + data_written_, buffer_.bytes());
    data_written_ += buffer_.bytes().size();
    return WorkStep(step);
  }
  if (progress_pending_) {
    progress_pending_ = false;
    return WorkStep(
        job::Step::Progress(job::kAllInputs, std::min(engine_->bytes_read(), plan_->read_bytes), plan_->read_bytes));
  }
  if (auto read = engine_->NextRead()) {
    const size_t input = (read->tuned ? options_.base.size() : 0) + read->shard;
    return WorkStep(job::Step::Read(input, read->begin, read->end));
  }
  if (!outcome_) {
    // The header, known once every module is made, into the region reserved for it.
    PB_ASSIGN_OR_RETURN(auto outcome, engine_->Finish());
    outcome_ = std::move(outcome);
    const std::string& header = outcome_->header;
    return WorkStep(job::Step::Write(kAdapterWeightsOutput, 0,
                                     std::span(reinterpret_cast<const uint8_t*>(header.data()), header.size())));
  }
  return WorkStep();
}

Status ExtractAdapterJob::SupplyWork(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return InputEndedInsideTensor(engine_->NextRead()->begin);
  buffer_.Clear();
  PB_RETURN_IF_ERROR(engine_->Push(bytes));
  write_pending_ = !buffer_.bytes().empty();
  progress_pending_ = true;
  return Status::Ok();
}

}  // namespace pb::app
