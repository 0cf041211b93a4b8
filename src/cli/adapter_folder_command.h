// What the native `create` and `extract` share around their jobs (app/adapter_folder_job.h): the output policy's
// facts of the command line, and running the job over the models' shards into the --out folder's transaction.
#pragma once

#include <string>
#include <vector>

#include "app/adapter_folder_job.h"
#include "app/command_line.h"
#include "cli/base_model.h"

namespace pb::cli {

// The job's common options from `line`: its flags, the inputs' facts (`facts`, and every path the line names),
// and with no --dry-run the --out folder that receives `names`.
app::AdapterFolderOptions AdapterFolderOptionsOf(const app::CommandLine& line, std::vector<app::InputFact> facts,
                                                 std::vector<std::string> names);

// Runs `job` over the shards of `models` (inputs in that order), into --out; prints the summary after the commit
// or reports the failure. The command's exit status.
int RunAdapterFolderJob(const app::CommandLine& line, app::AdapterFolderJob& job,
                        const std::vector<BaseModel*>& models);

}  // namespace pb::cli
