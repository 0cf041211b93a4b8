// `convert IN OUT`: the command's sequence is app::ConvertJob's; here IN is opened, the output policy's facts are
// gathered, and the job runs on the native executor (cli/job_runner.h).
#include <cstdio>

#include "app/convert_job.h"
#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/input_facts.h"
#include "cli/job_runner.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "cli/text_output.h"
#include "core/dtype_vocabulary.h"

namespace pb::cli {

int RunConvert(const app::CommandLine& line) {
  const bool json = line.Has("json");
  const std::string& in_path = line.positional[0];
  const std::string& out_path = line.positional[1];
  auto fail = [&](const Error& e) {
    return ReportFailure(ExplainInput(e, in_path, app::InputRole::kTensorFile), json);
  };
  auto in = InputFile::Open(in_path);
  if (!in.ok()) return fail(in.error());

  app::ConvertOptions options = app::ConvertOptionsFromLine(line, in->size());
  std::vector<app::InputFact> facts{FileFact("IN", in_path, std::nullopt)};
  AddNamedInputFacts(line, facts);
  app::OutputRequest request = DescribeOutputFile(out_path);
  const std::vector<std::string> names = request.writes;
  options.output = app::ConvertOptions::OutputCheck{std::move(facts), std::move(request), app::OutputFlags{}};
  app::ConvertJob job(std::move(options));

  auto begin = [&]() -> Result<std::unique_ptr<OutputTransaction>> {
    return OutputTransaction::ForFile(out_path, job.output_plan());  // the plan the job's policy check made
  };
  TransactionOutputs outputs(begin, names);
  StderrProgress progress(line, in->size());
  const JobInput inputs[] = {{&in.value(), in_path.substr(in_path.rfind('/') + 1)}};  // the file name, not its path
  Status status = RunJob(job, inputs, outputs, progress);
  if (!status.ok()) return fail(status.error());  // the temporary file is removed when `outputs` goes away
  WriteText(stdout, job.summary());
  return 0;
}

}  // namespace pb::cli
