// `adapter-info` and `translate`: find an adapter directory's files, read its configs, gather the output policy's
// facts, and run the command's job (app/translate_job.h) over the weights file; the job writes the translated files
// atomically (all prepared before any is renamed into place).
#include <cstdio>

#include "app/adapter_files.h"
#include "app/base_config_source.h"
#include "app/output_policy.h"
#include "app/translate_job.h"
#include "app/translate_output.h"
#include "cli/adapter_dir.h"
#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/http_source.h"
#include "cli/input_facts.h"
#include "cli/job_runner.h"
#include "cli/naming_table_files.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "cli/text_output.h"

namespace pb::cli {
namespace {

using adapter::AdapterFormat;

// translate --to gguf|gguf-names: the base config by app::ChooseBaseConfig's rule (--base-config, else the adapter's
// base_model_name_or_path as a local folder, else its Hub repo when the adapter came from the Hub), read into
// dir.base_config; the note or the hint goes to the job with the write options. A local file chosen is an input.
Status ResolveBaseConfig(const app::CommandLine& line, AdapterDir& dir, adapter::WriteOptions& write_options,
                         std::vector<app::InputFact>& inputs) {
  app::BaseConfigFacts facts;
  facts.flag = line.Value("base-config");
  if (dir.config) facts.base = app::AdapterBaseModelOf(*dir.config);
  if (facts.base && !facts.flag) facts.local_config_exists = IsRegularFile(app::LocalBaseConfigPath(facts.base->name));
  facts.adapter_remote = IsRemoteAddress(line.positional[0]);
  facts.endpoint = HubEndpoint();
  PB_ASSIGN_OR_RETURN(auto choice, app::ChooseBaseConfig(facts));
  using Kind = app::BaseConfigChoice::Kind;
  if (choice.kind == Kind::kLocal) {
    PB_ASSIGN_OR_RETURN(auto text, ReadText(choice.path));
    dir.base_config = std::move(text);
    inputs.push_back(FileFact(facts.flag ? "--base-config" : "base_model_name_or_path", choice.path, std::nullopt));
  } else if (choice.kind == Kind::kRemote) {
    PB_ASSIGN_OR_RETURN(auto bytes, ReadRemoteWhole(choice.remote, WholeCap::kJson));
    dir.base_config = std::string(bytes.bytes.begin(), bytes.bytes.end());
  }
  write_options.base_config_note = choice.note;
  write_options.base_config_hint = choice.hint;
  return Status::Ok();
}

// Both commands: the adapter's files and configs gathered, the job run over its weights file into `out_names`
// (none: nothing written), the summary printed.
int RunAdapterJob(const app::CommandLine& line, bool info) {
  app::TranslateOptions options = app::TranslateOptionsFromLine(line, info);
  auto fail = [&](const Error& e) { return ReportFailure(e, options.json); };
  auto explain = [&](const Error& e) { return ExplainInput(e, line.positional[0], app::InputRole::kAdapter); };
  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  options.tables = std::move(tables.value());
  // translate --to gguf|gguf-names finds the base config as convert_lora_to_gguf.py does (ResolveBaseConfig).
  const std::optional<std::string> base_config = line.Value("base-config");
  const bool needs_base = !info && (options.to == AdapterFormat::kGguf || options.to == AdapterFormat::kGgufNames);
  auto dir = OpenAdapterDir(line.positional[0], needs_base ? std::nullopt : base_config);
  if (!dir.ok()) return fail(explain(dir.error()));
  std::vector<app::InputFact> inputs;
  if (needs_base) {
    if (Status s = ResolveBaseConfig(line, dir.value(), options.write, inputs); !s.ok()) return fail(s.error());
  } else if (base_config) {
    inputs.push_back(FileFact("--base-config", *base_config, std::nullopt));
  }
  options.weights_name = WeightsNameOf(dir.value());
  options.weights_size = dir->weights ? dir->weights->size() : dir->weights_bytes.size();
  if (dir->config) options.config_size = dir->config->size();
  if (dir->base_config) options.base_config_size = dir->base_config->size();

  // translate's policy: no link out of IN_DIR, no silent loss, no output over an input or into a non-empty
  // directory. OUT is described by the names the job will write (the format's, or OUT.gguf's own).
  std::vector<std::string> names;
  std::optional<std::string> out_path;
  bool one_file = false;
  if (!info) {
    AddAdapterFacts("IN_DIR", line.positional[0], dir->weights_path, inputs);
    AddNamedInputFacts(line, inputs);
    options.output = app::TranslateOptions::OutputCheck{std::move(inputs), std::nullopt, {}};
    options.output->flags.force = line.Has("force");
    options.output->flags.follow_links = line.Has("follow-links");
    if (!options.dry_run) {
      out_path = line.positional[1];
      one_file = app::TranslateOutputIsFile(options.to, *out_path);
      names = app::TranslateOutputNames(options.to, *out_path);
      options.output->out = one_file ? DescribeOutputFile(*out_path)
                                     : DescribeOutputDirectory("OUT_DIR", *out_path, names);
      if (one_file) names = {options.output->out->writes[0]};
    }
  }
  app::TranslateJob job(std::move(options));
  auto begin = [&]() -> Result<std::unique_ptr<OutputTransaction>> {
    // The plan the job's policy check made; any return before the commit removes the temporary files (and OUT_DIR
    // if it was created).
    if (one_file) return OutputTransaction::ForFile(*out_path, job.output_plan());
    return OutputTransaction::Begin(*out_path, job.output_plan());
  };
  TransactionOutputs outputs(begin, names);
  // The weights (the file read, named as convert names IN), then the configs' text, already read.
  auto text = [](const std::optional<std::string>& t) {
    return t ? std::span(reinterpret_cast<const uint8_t*>(t->data()), t->size()) : std::span<const uint8_t>();
  };
  const JobInput job_inputs[] = {{dir->weights ? &*dir->weights : nullptr,
                                  dir->weights_path.substr(dir->weights_path.rfind('/') + 1), dir->weights_bytes},
                                 {nullptr, std::string(app::kAdapterConfigName), text(dir->config)},
                                 {nullptr, "config.json", text(dir->base_config)}};
  StderrProgress progress(line, job_inputs[0].file ? job_inputs[0].file->size() : job_inputs[0].bytes.size());
  if (Status s = RunJob(job, job_inputs, outputs, progress); !s.ok())
    return fail(job.adapter_read() ? s.error() : explain(s.error()));
  WriteText(stdout, job.summary());
  return 0;
}

}  // namespace

int RunAdapterInfo(const app::CommandLine& line) { return RunAdapterJob(line, true); }

int RunTranslate(const app::CommandLine& line) { return RunAdapterJob(line, false); }

}  // namespace pb::cli
