// `adapter-info` and `translate`: gather an adapter directory's files, hand the bytes to the core, write
// the translated files atomically (all prepared before any is renamed into place).
#include <cstdio>

#include "adapter/adapter_report.h"
#include "adapter/delta_norm.h"
#include "adapter/weights_emitter.h"
#include "app/base_config_source.h"
#include "app/translate_output.h"
#include "gguf/gguf_format.h"
#include "cli/commands.h"
#include "cli/adapter_dir.h"
#include "cli/file_io.h"
#include "cli/http_source.h"
#include "cli/naming_table_files.h"
#include "cli/input_facts.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "app/cli_text.h"
#include "app/output_policy.h"
#include "cli/text_output.h"

namespace pb::cli {
namespace {

using adapter::AdapterFormat;

// Options both commands share.
struct CommonOptions {
  bool json = false;
  bool strict = false;
  std::optional<std::string> arch;
  std::optional<std::string> base_config;
  std::optional<AdapterFormat> from;
  std::vector<std::string> positional;
};

CommonOptions CommonOptionsOf(const app::CommandLine& line) {
  CommonOptions o;
  o.json = line.Has("json");
  o.strict = line.Has("strict");
  o.arch = line.Value("arch");
  o.base_config = line.Value("base-config");
  if (auto from = line.Value("from")) o.from = adapter::ParseFormatName(*from);  // a choice the grammar checked
  o.positional = line.positional;
  return o;
}

// translate --to gguf|gguf-names: the base config by app::ChooseBaseConfig's rule (--base-config, else the adapter's
// base_model_name_or_path as a local folder, else its Hub repo when the adapter came from the Hub), read into
// dir.base_config; the note or the hint goes to the core with the write options. A local file chosen is an input.
Status ResolveBaseConfig(const CommonOptions& o, AdapterDir& dir, adapter::WriteOptions& write_options,
                         std::vector<app::InputFact>& inputs) {
  app::BaseConfigFacts facts;
  facts.flag = o.base_config;
  if (dir.config) facts.base = app::AdapterBaseModelOf(*dir.config);
  if (facts.base && !facts.flag) facts.local_config_exists = IsRegularFile(app::LocalBaseConfigPath(facts.base->name));
  facts.adapter_remote = IsRemoteAddress(o.positional[0]);
  facts.endpoint = HubEndpoint();
  PB_ASSIGN_OR_RETURN(auto choice, app::ChooseBaseConfig(facts));
  using Kind = app::BaseConfigChoice::Kind;
  if (choice.kind == Kind::kLocal) {
    PB_ASSIGN_OR_RETURN(auto text, ReadText(choice.path));
    dir.base_config = std::move(text);
    inputs.push_back(FileFact(o.base_config ? "--base-config" : "base_model_name_or_path", choice.path, std::nullopt));
  } else if (choice.kind == Kind::kRemote) {
    PB_ASSIGN_OR_RETURN(auto bytes, ReadRemoteWhole(choice.remote, WholeCap::kJson));
    dir.base_config = std::string(bytes.bytes.begin(), bytes.bytes.end());
  }
  write_options.base_config_note = choice.note;
  write_options.base_config_hint = choice.hint;
  return Status::Ok();
}

}  // namespace

int RunAdapterInfo(const app::CommandLine& line) {
  const CommonOptions o = CommonOptionsOf(line);
  auto fail = [&](const Error& e) { return ReportFailure(e, o.json); };
  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  auto dir = LoadAdapterDir(o.positional[0], o.base_config);
  if (!dir.ok()) return fail(ExplainInput(dir.error(), o.positional[0], app::InputRole::kAdapter));
  adapter::ReadOptions options{o.from, o.arch, o.strict, tables->get()};
  auto read = adapter::ReadAdapter(SourceOf(dir.value()), options);
  if (!read.ok()) return fail(read.error());
  adapter::DeltaNormPass norms(read->adapter);  // module by module, each one's factors read with pread
  if (Status s = SupplyAdapterBytes(norms, dir.value()); !s.ok()) return fail(s.error());
  read->delta_norms = norms.norms();
  std::string out = o.json ? adapter::RenderAdapterInfoJson(read.value())
                           : adapter::RenderAdapterInfoText(read.value());
  WriteText(stdout, out);
  return 0;
}

int RunTranslate(const app::CommandLine& line) {
  const CommonOptions o = CommonOptionsOf(line);
  const std::optional<AdapterFormat> to = adapter::ParseFormatName(*line.Value("to"));  // a choice the grammar checked
  const bool dry_run = line.Has("dry-run"), old_peft = line.Has("old-peft"), allow_partial = line.Has("allow-partial");
  app::OutputFlags flags;
  flags.force = line.Has("force");
  flags.follow_links = line.Has("follow-links");
  auto fail = [&](const Error& e) { return ReportFailure(e, o.json); };
  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  // translate --to gguf|gguf-names finds the base config as convert_lora_to_gguf.py does (ResolveBaseConfig).
  const bool needs_base = *to == AdapterFormat::kGguf || *to == AdapterFormat::kGgufNames;
  auto dir = LoadAdapterDir(o.positional[0], needs_base ? std::nullopt : o.base_config);
  if (!dir.ok()) return fail(ExplainInput(dir.error(), o.positional[0], app::InputRole::kAdapter));
  adapter::ReadOptions read_options{o.from, o.arch, o.strict, tables->get()};
  adapter::WriteOptions write_options;
  std::vector<app::InputFact> inputs;
  if (needs_base) {
    if (Status s = ResolveBaseConfig(o, dir.value(), write_options, inputs); !s.ok()) return fail(s.error());
  } else if (o.base_config) {
    inputs.push_back(FileFact("--base-config", *o.base_config, std::nullopt));
  }
  write_options.tables = tables->get();
  write_options.strict = o.strict;
  write_options.compat_pre_014 = old_peft;
  write_options.allow_partial = allow_partial;
  if (auto outtype = line.Value("outtype")) write_options.gguf_outtype = *gguf::ParseOutType(*outtype);  // checked
  const std::string& out_path = o.positional[1];
  const bool one_file = app::TranslateOutputIsFile(*to, out_path);  // OUT.gguf, else OUT_DIR/<names>
  if (one_file) write_options.weights_name = out_path.substr(out_path.rfind('/') + 1);
  auto result = adapter::Translate(SourceOf(dir.value()), *to, read_options, write_options);
  if (!result.ok()) return fail(result.error());

  // The policy: no link out of IN_DIR, no silent loss, no output over an input or into a non-empty directory.
  AddAdapterFacts("IN_DIR", o.positional[0], dir->weights_path, inputs);
  AddNamedInputFacts(line, inputs);
  if (Status s = app::CheckInputLinks("translate", inputs, flags); !s.ok()) return fail(s.error());
  WriteText(stderr, result->warnings);  // Translate applied the no-silent-loss rule: refused, or these warnings
  const bool text_out = !o.json && !line.Has("quiet");
  if (!dry_run) {
    const auto& output = result->output;
    std::vector<std::string> names{output.weights_name};
    if (output.config_name) names.push_back(*output.config_name);
    auto plan = app::PlanOutput(
        "translate", inputs,
        one_file ? DescribeOutputFile(out_path) : DescribeOutputDirectory("OUT_DIR", out_path, names), flags);
    if (!plan.ok()) return fail(plan.error());
    auto transaction =
        one_file
            ? Result<std::unique_ptr<OutputTransaction>>(OutputTransaction::ForFile(out_path, std::move(plan.value())))
            : OutputTransaction::Begin(out_path, std::move(plan.value()));
    if (!transaction.ok()) return fail(transaction.error());
    // The plan is told before the work starts; the outcome line follows it.
    if (text_out) {
      std::string plan_text = adapter::RenderTranslatePlanText(result.value(), *to);
      WriteText(stdout, plan_text);
      std::fflush(stdout);
    }
    // Any return below before Commit succeeds removes the temporary files (and OUT_DIR if it was created).
    auto weights = transaction.value()->Add(one_file ? DescribeOutputFile(out_path).writes[0] : output.weights_name);
    if (!weights.ok()) return fail(weights.error());
    auto emitter = adapter::MakeWeightsEmitter(output, *weights.value());  // tensor by tensor, read with pread
    // Progress counts the adapter's tensor bytes read for the output, of its weights file's size (the work
    // completes short of it: the header was read before).
    StderrProgress progress(line, dir->weights->size());
    progress.StartFile(dir->weights_path.substr(dir->weights_path.rfind('/') + 1), 0);  // the file read, as convert
    Status status = emitter->Begin();
    if (status.ok()) status = SupplyAdapterBytes(*emitter, dir.value(), [&](uint64_t done) { progress.Update(done); });
    if (status.ok()) status = emitter->Finish();
    if (!status.ok()) {
      progress.Abandon();
      return fail(status.error());
    }
    progress.Finish();
    if (output.config_name) {
      auto config = transaction.value()->Add(*output.config_name);
      if (!config.ok()) return fail(config.error());
      const auto* text = reinterpret_cast<const uint8_t*>(output.config_text.data());
      if (Status s = config.value()->Write({text, output.config_text.size()}); !s.ok()) return fail(s.error());
    }
    if (Status s = transaction.value()->Commit(); !s.ok()) return fail(s.error());
  }
  // A dry run's plan is all it prints; a translation's plan was printed before the work.
  std::string summary = o.json    ? adapter::RenderTranslateJson(result.value(), *to, dry_run)
                        : dry_run ? adapter::RenderTranslateText(result.value(), *to, true)
                                  : adapter::RenderTranslateOutcomeText(result.value());
  if (o.json || !line.Has("quiet")) WriteText(stdout, summary);
  return 0;
}

}  // namespace pb::cli
