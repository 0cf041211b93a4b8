// `extract`: the command's sequence is app::ExtractAdapterJob's; here both models are opened (headers only, local
// or remote), the output policy's facts are gathered, and the job runs on the native executor (cli/job_runner.h).
#include "app/extract_adapter_job.h"
#include "cli/adapter_folder_command.h"
#include "cli/base_model.h"
#include "cli/commands.h"
#include "cli/naming_table_files.h"

namespace pb::cli {
namespace {

std::vector<compose::ExtractShard> ShardsOf(const BaseModel& model) {
  std::vector<compose::ExtractShard> shards;
  for (size_t i = 0; i < model.headers.size(); ++i) shards.push_back({model.shard_names[i], &model.headers[i]});
  return shards;
}

}  // namespace

int RunExtract(const app::CommandLine& line) {
  const std::string base_path = *line.Value("base"), tuned_path = *line.Value("tuned");
  const std::optional<std::string> base_config = line.Value("base-config");
  auto fail = [&](const Error& e) { return ReportFailure(e, line.Has("json")); };

  auto options = app::ExtractOptionsFromLine(line);  // checked by the grammar
  if (!options.ok()) return fail(options.error());
  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  options->tables = tables->get();
  auto base = OpenBase(base_path, base_config);
  if (!base.ok()) return fail(ExplainInput(base.error(), base_path, app::InputRole::kBase));
  auto tuned = OpenBase(tuned_path, std::nullopt);
  if (!tuned.ok()) return fail(ExplainInput(tuned.error(), tuned_path, app::InputRole::kBase));

  const std::vector<std::string> names{std::string(compose::kExtractWeightsName),
                                       std::string(compose::kExtractConfigName)};
  std::vector<app::InputFact> facts = BaseFacts(base.value(), base_config);
  for (auto& fact : BaseFacts(tuned.value(), std::nullopt)) facts.push_back(std::move(fact));
  app::ExtractAdapterJob job({.extract = std::move(options.value()),
                              .base = ShardsOf(base.value()),
                              .tuned = ShardsOf(tuned.value()),
                              .base_config = base->config,
                              .tuned_config = tuned->config,
                              .folder = AdapterFolderOptionsOf(line, std::move(facts), names)});
  return RunAdapterFolderJob(line, job, {&base.value(), &tuned.value()});
}

}  // namespace pb::cli
