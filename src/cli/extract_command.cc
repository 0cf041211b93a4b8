// `extract`: open both models (headers only, local or remote), plan in the core, then feed the core the byte
// ranges it asks for, module by module, while it writes adapter_model.safetensors after a reserved header
// region; the header is filled in last and adapter_config.json written, in one all-or-nothing output.
#include <cstdio>

#include "app/create_report.h"
#include "app/extract_report.h"
#include "app/output_policy.h"
#include "cli/base_model.h"
#include "cli/commands.h"
#include "cli/input_facts.h"
#include "cli/naming_table_files.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "compose/extract_job.h"
#include "cli/text_output.h"

namespace pb::cli {
namespace {

std::vector<compose::ExtractShard> ShardsOf(const BaseModel& model) {
  std::vector<compose::ExtractShard> shards;
  for (size_t i = 0; i < model.headers.size(); ++i) shards.push_back({model.shard_names[i], &model.headers[i]});
  return shards;
}

}  // namespace

int RunExtract(const app::CommandLine& line) {
  const bool json = line.Has("json"), dry_run = line.Has("dry-run"), quiet = line.Has("quiet");
  const std::string base_path = *line.Value("base"), tuned_path = *line.Value("tuned");
  const std::optional<std::string> base_config = line.Value("base-config"), out_dir = line.Value("out");
  app::OutputFlags flags;
  flags.force = line.Has("force");
  flags.follow_links = line.Has("follow-links");
  auto fail = [&](const Error& e) { return ReportFailure(e, json); };

  auto parsed = compose::ParseExtractArguments(app::ExtractArgumentsOf(line));  // checked by the grammar
  if (!parsed.ok()) return fail(parsed.error());
  compose::ExtractOptions options = std::move(parsed.value());
  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  options.tables = tables->get();
  options.arch = line.Value("arch");
  const app::CreateBaseName base_name = app::CreateBaseNameOf(base_path);
  options.base_name_or_path = base_name.name;
  options.revision = base_name.revision;

  auto base = OpenBase(base_path, base_config);
  if (!base.ok()) return fail(ExplainInput(base.error(), base_path, app::InputRole::kBase));
  auto tuned = OpenBase(tuned_path, std::nullopt);
  if (!tuned.ok()) return fail(ExplainInput(tuned.error(), tuned_path, app::InputRole::kBase));
  auto plan = compose::PlanExtract(ShardsOf(base.value()), ShardsOf(tuned.value()), base->config, tuned->config,
                                   std::move(options));
  if (!plan.ok()) return fail(plan.error());

  std::vector<app::InputFact> inputs = BaseFacts(base.value(), base_config);
  for (auto& fact : BaseFacts(tuned.value(), std::nullopt)) inputs.push_back(std::move(fact));
  AddNamedInputFacts(line, inputs);
  if (Status s = app::CheckInputLinks("extract", inputs, flags); !s.ok()) return fail(s.error());
  if (dry_run) {
    std::string summary = json ? app::RenderExtractJson(plan.value(), nullptr)
                               : app::RenderExtractPlanText(plan.value(), true);
    if (json || !quiet) WriteText(stdout, summary);
    return 0;
  }
  const std::vector<std::string> names{std::string(compose::kExtractWeightsName),
                                       std::string(compose::kExtractConfigName)};
  auto output = app::PlanOutput("extract", inputs, DescribeOutputDirectory("--out", *out_dir, names), flags);
  if (!output.ok()) return fail(output.error());
  auto transaction = OutputTransaction::Begin(*out_dir, std::move(output.value()));
  if (!transaction.ok()) return fail(transaction.error());
  if (!json && !quiet) {
    std::string text = app::RenderExtractPlanText(plan.value(), false);
    WriteText(stdout, text);
    std::fflush(stdout);
  }
  auto weights = transaction.value()->Add(std::string(compose::kExtractWeightsName));
  if (!weights.ok()) return fail(weights.error());
  // The header region first (filled in at the end), then the data as the core makes it.
  const std::vector<uint8_t> hole(size_t(plan->reserved_header), 0);
  if (Status s = weights.value()->Write(hole); !s.ok()) return fail(s.error());
  compose::ExtractJob job(plan.value(), *weights.value());
  {
    StderrProgress progress(line, plan->read_bytes);
    while (auto read = job.NextRead()) {
      BaseModel& model = read->tuned ? tuned.value() : base.value();
      Status s =
          model.shards[read->shard]->Stream(read->begin, read->end, [&](std::span<const uint8_t> bytes) -> Status {
            PB_RETURN_IF_ERROR(job.Push(bytes));
            progress.Update(std::min(job.bytes_read(), plan->read_bytes));
            return Status::Ok();
          });
      if (!s.ok()) {
        progress.Abandon();
        return fail(s.error());
      }
    }
    progress.Finish();
  }
  auto outcome = job.Finish();
  if (!outcome.ok()) return fail(outcome.error());
  const auto& header = outcome->header;
  if (Status s = weights.value()->WriteAt(0, {reinterpret_cast<const uint8_t*>(header.data()), header.size()}); !s.ok())
    return fail(s.error());
  auto config = transaction.value()->Add(std::string(compose::kExtractConfigName));
  if (!config.ok()) return fail(config.error());
  const auto& text = outcome->config_text;
  if (Status s = config.value()->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()}); !s.ok())
    return fail(s.error());
  if (Status s = transaction.value()->Commit(); !s.ok()) return fail(s.error());
  std::string summary = json ? app::RenderExtractJson(plan.value(), &outcome.value())
                             : app::RenderExtractOutcomeText(plan.value(), outcome.value());
  if (json || !quiet) WriteText(stdout, summary);
  return 0;
}

}  // namespace pb::cli
