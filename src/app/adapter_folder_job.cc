#include "app/adapter_folder_job.h"

namespace pb::app {

AdapterFolderOptions AdapterFolderOptionsFromLine(const CommandLine& line) {
  AdapterFolderOptions options;
  options.json = line.Has("json");
  options.quiet = line.Has("quiet");
  options.dry_run = line.Has("dry-run");
  options.flags.force = line.Has("force");
  options.flags.follow_links = line.Has("follow-links");
  return options;
}

Status WriteBuffer::Write(std::span<const uint8_t> bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return Status::Ok();
}

Error InputEndedInsideTensor(uint64_t at) {
  return MakeError(ErrorCode::IoError, "source ended at byte " + std::to_string(at) + ", inside a tensor", std::nullopt,
                   at);
}

AdapterFolderJob::AdapterFolderJob(std::string_view command, std::vector<std::string> names,
                                   AdapterFolderOptions options)
    : command_(command), names_(std::move(names)), options_(std::move(options)) {}

Result<job::Step> AdapterFolderJob::Advance() {
  switch (phase_) {
    case Phase::kPlan: {
      PB_RETURN_IF_ERROR(Plan());
      // An input reached through a link is refused unless --follow-links, even when nothing is written.
      PB_RETURN_IF_ERROR(CheckInputLinks(command_, options_.inputs, options_.flags));
      if (options_.dry_run) {
        phase_ = Phase::kDone;
        return Advance();
      }
      if (options_.out) {
        PB_ASSIGN_OR_RETURN(output_plan_, PlanOutput(command_, options_.inputs, *options_.out, options_.flags));
      }
      // An empty write opens the output folder now: one that cannot be made is reported before the plan is told.
      phase_ = Phase::kTell;
      return job::Step::Write(kAdapterWeightsOutput, 0, {});
    }
    case Phase::kTell:
      // The plan is told before the work starts; the outcome follows it once the folder is in place.
      phase_ = Phase::kWork;
      if (!options_.json && !options_.quiet) {
        plan_text_ = PlanText(false);
        return job::Step::Message(plan_text_);
      }
      [[fallthrough]];
    case Phase::kWork: {
      PB_ASSIGN_OR_RETURN(std::optional<job::Step> step, Work());
      if (step) return *step;
      phase_ = Phase::kConfig;
      [[fallthrough]];
    }
    case Phase::kConfig: {
      phase_ = Phase::kDone;
      const std::string& text = ConfigText();
      return job::Step::Write(kAdapterConfigOutput, 0,
                              std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    }
    case Phase::kDone:
      summary_ = options_.json      ? Summary(true, options_.dry_run)
                 : options_.quiet   ? ""
                 : options_.dry_run ? PlanText(true)
                                    : Summary(false, false);
      return job::Step{};
  }
  return job::Step{};
}

Status AdapterFolderJob::Accept(std::span<const uint8_t> bytes) {
  if (Status status = SupplyWork(bytes); !status.ok()) return Fail(status.error());
  return Status::Ok();
}

}  // namespace pb::app
