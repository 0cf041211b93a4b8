// `create`: open the base (headers only, local or remote), plan the fresh adapter in the core, stream the DoRA
// weights through it when asked, then write adapter_model.safetensors tensor by tensor and adapter_config.json
// into one all-or-nothing output.
#include <cstdio>

#include "app/create_report.h"
#include "app/output_policy.h"
#include "cli/base_model.h"
#include "cli/commands.h"
#include "cli/input_facts.h"
#include "cli/naming_table_files.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "compose/create_writer.h"
#include "cli/text_output.h"

namespace pb::cli {

int RunCreate(const app::CommandLine& line) {
  const bool json = line.Has("json"), dry_run = line.Has("dry-run"), quiet = line.Has("quiet");
  const std::string base_path = *line.Value("base");
  const std::optional<std::string> base_config = line.Value("base-config"), out_dir = line.Value("out");
  app::OutputFlags flags;
  flags.force = line.Has("force");
  flags.follow_links = line.Has("follow-links");
  auto fail = [&](const Error& e) { return ReportFailure(e, json); };

  auto parsed = compose::ParseCreateArguments(app::CreateArgumentsOf(line));  // checked by the grammar
  if (!parsed.ok()) return fail(parsed.error());
  compose::CreateOptions options = std::move(parsed.value());
  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  options.tables = tables->get();
  options.arch = line.Value("arch");
  const app::CreateBaseName base_name = app::CreateBaseNameOf(base_path);
  options.base_name_or_path = base_name.name;
  options.revision = base_name.revision;

  if (auto refusal = compose::RefuseConfigAsBase(base_path)) return fail(*refusal);
  auto base = OpenBase(base_path, base_config);
  if (!base.ok()) return fail(ExplainInput(base.error(), base_path, app::InputRole::kBase));
  std::vector<compose::CreateShard> shards;
  for (size_t i = 0; i < base->headers.size(); ++i) shards.push_back({base->shard_names[i], &base->headers[i]});
  auto plan = compose::PlanCreate(shards, base->config, std::move(options));
  if (!plan.ok()) return fail(plan.error());

  std::vector<app::InputFact> inputs = BaseFacts(base.value(), base_config);
  AddNamedInputFacts(line, inputs);
  if (Status s = app::CheckInputLinks("create", inputs, flags); !s.ok()) return fail(s.error());
  if (!dry_run) {
    const std::vector<std::string> names{std::string(compose::kCreateWeightsName),
                                         std::string(compose::kCreateConfigName)};
    auto output = app::PlanOutput("create", inputs, DescribeOutputDirectory("--out", *out_dir, names), flags);
    if (!output.ok()) return fail(output.error());
    auto transaction = OutputTransaction::Begin(*out_dir, std::move(output.value()));
    if (!transaction.ok()) return fail(transaction.error());
    // The plan is told before the work starts; the outcome line follows it.
    if (!json && !quiet) {
      std::string text = app::RenderCreatePlanText(plan.value(), false);
      WriteText(stdout, text);
      std::fflush(stdout);
    }
    // DoRA: the targeted weights, streamed through the magnitude pass (progress counts their bytes; without
    // DoRA nothing is read and no progress is drawn).
    compose::MagnitudePass magnitudes(plan.value());
    if (magnitudes.total_bytes() > 0) {
      StderrProgress progress(line, magnitudes.total_bytes());
      uint64_t done = 0;
      std::optional<size_t> shown;
      for (const auto& range : magnitudes.ranges()) {
        if (shown != range.shard) progress.StartFile(base->shard_names[range.shard], done);
        shown = range.shard;
        Status s =
            base->shards[range.shard]->Stream(range.begin, range.end, [&](std::span<const uint8_t> bytes) -> Status {
              PB_RETURN_IF_ERROR(magnitudes.Push(bytes));
              done += bytes.size();
              progress.Update(done);
              return Status::Ok();
            });
        if (!s.ok()) {
          progress.Abandon();
          return fail(s.error());
        }
      }
      progress.Finish();
    }
    auto weights = transaction.value()->Add(std::string(compose::kCreateWeightsName));
    if (!weights.ok()) return fail(weights.error());
    compose::AdapterEmitter emitter(plan.value(), magnitudes.TakeNorms(), *weights.value());
    Status status = emitter.Begin();
    if (status.ok()) status = emitter.Finish();
    if (!status.ok()) return fail(status.error());
    auto config = transaction.value()->Add(std::string(compose::kCreateConfigName));
    if (!config.ok()) return fail(config.error());
    const auto& text = plan->config_text;
    if (Status s = config.value()->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()}); !s.ok())
      return fail(s.error());
    if (Status s = transaction.value()->Commit(); !s.ok()) return fail(s.error());
  }
  std::string summary = json      ? app::RenderCreateJson(plan.value(), dry_run)
                        : dry_run ? app::RenderCreatePlanText(plan.value(), true)
                                  : app::RenderCreateOutcomeText(plan.value());
  if (json || !quiet) WriteText(stdout, summary);
  return 0;
}

}  // namespace pb::cli
