// `create`: the command's sequence is app::CreateJob's; here the base is opened (headers only, local or remote),
// the output policy's facts are gathered, and the job runs on the native executor (cli/job_runner.h).
#include "app/create_job.h"
#include "cli/adapter_folder_command.h"
#include "cli/base_model.h"
#include "cli/commands.h"
#include "cli/naming_table_files.h"

namespace pb::cli {

int RunCreate(const app::CommandLine& line) {
  const std::string base_path = *line.Value("base");
  const std::optional<std::string> base_config = line.Value("base-config");
  auto fail = [&](const Error& e) { return ReportFailure(e, line.Has("json")); };

  auto options = app::CreateOptionsFromLine(line);  // checked by the grammar
  if (!options.ok()) return fail(options.error());
  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  options->tables = tables->get();
  if (auto refusal = compose::RefuseConfigAsBase(base_path)) return fail(*refusal);
  auto base = OpenBase(base_path, base_config);
  if (!base.ok()) return fail(ExplainInput(base.error(), base_path, app::InputRole::kBase));

  const std::vector<std::string> names{std::string(compose::kCreateWeightsName),
                                       std::string(compose::kCreateConfigName)};
  std::vector<compose::CreateShard> shards;
  for (size_t i = 0; i < base->headers.size(); ++i) shards.push_back({base->shard_names[i], &base->headers[i]});
  app::CreateJob job({.create = std::move(options.value()),
                      .shards = std::move(shards),
                      .base_config = base->config,
                      .folder = AdapterFolderOptionsOf(line, BaseFacts(base.value(), base_config), names)});
  return RunAdapterFolderJob(line, job, {&base.value()});
}

}  // namespace pb::cli
