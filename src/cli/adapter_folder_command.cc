#include "cli/adapter_folder_command.h"

#include <cstdio>

#include "cli/commands.h"
#include "cli/input_facts.h"
#include "cli/job_runner.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "cli/text_output.h"

namespace pb::cli {

app::AdapterFolderOptions AdapterFolderOptionsOf(const app::CommandLine& line, std::vector<app::InputFact> facts,
                                                 std::vector<std::string> names) {
  app::AdapterFolderOptions options = app::AdapterFolderOptionsFromLine(line);
  options.inputs = std::move(facts);
  AddNamedInputFacts(line, options.inputs);
  if (!options.dry_run) options.out = DescribeOutputDirectory("--out", *line.Value("out"), std::move(names));
  return options;
}

int RunAdapterFolderJob(const app::CommandLine& line, app::AdapterFolderJob& job,
                        const std::vector<BaseModel*>& models) {
  std::vector<JobInput> inputs;
  for (BaseModel* model : models)
    for (size_t i = 0; i < model->shards.size(); ++i)
      inputs.push_back({.name = model->shard_names[i], .shard = model->shards[i].get()});
  const std::string out_dir = line.Value("out").value_or("");
  auto begin = [&]() -> Result<std::unique_ptr<OutputTransaction>> {
    return OutputTransaction::Begin(out_dir, job.output_plan());  // the plan the job's policy check made
  };
  // A dry run has no outputs: it commits nothing.
  TransactionOutputs outputs(begin, line.Has("dry-run") ? std::vector<std::string>{} : job.output_names());
  StderrProgress progress(line, 0);  // the job tells the total with its progress
  Status status = RunJob(job, inputs, outputs, progress);
  if (!status.ok()) return ReportFailure(status.error(), line.Has("json"));
  if (!job.summary().empty()) WriteText(stdout, job.summary());
  return 0;
}

}  // namespace pb::cli
