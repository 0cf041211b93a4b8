// `combine`: read every adapter (local or remote), plan the combination in the core, then write the combined
// PEFT adapter module by module, each module's factors read with pread (or from a remote adapter's bytes) as
// the core asks for them; the files appear only when both are complete.
#include <cstdio>

#include "app/combine_args.h"
#include "app/combine_report.h"
#include "app/output_policy.h"
#include "cli/adapter_dir.h"
#include "cli/commands.h"
#include "cli/input_facts.h"
#include "cli/naming_table_files.h"
#include "cli/output_transaction.h"
#include "compose/combine_writer.h"
#include "cli/text_output.h"

namespace pb::cli {
namespace {

// Reads what the writer asks for, from each input's weights, until it asks for nothing more.
Status SupplyInputs(compose::CombineWriter& writer, const std::vector<AdapterDir>& dirs) {
  constexpr uint64_t kPiece = 4 << 20;
  std::vector<uint8_t> buffer;
  for (;;) {
    const std::vector<compose::InputRange> needs = writer.needs();  // copied: it changes once supplied
    if (needs.empty()) return Status::Ok();
    for (const auto& need : needs)
      for (uint64_t pos = need.range.begin; pos < need.range.end;) {
        const size_t n = static_cast<size_t>(std::min(kPiece, need.range.end - pos));
        buffer.resize(n);
        PB_RETURN_IF_ERROR(ReadWeightsAt(dirs[need.input], pos, buffer));
        PB_RETURN_IF_ERROR(writer.Supply(buffer));
        pos += n;
      }
  }
}

}  // namespace

int RunCombine(const app::CommandLine& line) {
  const bool json = line.Has("json"), dry_run = line.Has("dry-run");
  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  app::OutputFlags flags;
  flags.force = line.Has("force");
  flags.follow_links = line.Has("follow-links");
  const std::optional<std::string> base_config = line.Value("base-config");
  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  std::optional<adapter::AdapterFormat> from;
  if (auto f = line.Value("from")) from = adapter::ParseFormatName(*f);  // a choice the grammar checked

  std::vector<AdapterDir> dirs;
  std::vector<adapter::ReadResult> reads;
  std::vector<app::InputFact> facts;
  for (const std::string& given : line.positional) {
    auto dir = LoadAdapterDir(given, base_config);
    if (!dir.ok()) return fail(ExplainInput(dir.error(), given, app::InputRole::kAdapter));
    auto read =
        adapter::ReadAdapter(SourceOf(dir.value()), {from, line.Value("arch"), line.Has("strict"), tables->get()});
    if (!read.ok()) {
      Error e = read.error();
      e.message = given + ": " + e.message;
      return fail(e);
    }
    AddAdapterFacts("ADAPTER", given, dir->weights_path, facts);
    dirs.push_back(std::move(dir.value()));
    reads.push_back(std::move(read.value()));
  }
  if (base_config) facts.push_back(FileFact("--base-config", *base_config, std::nullopt));
  std::vector<compose::CombineInput> inputs;
  for (size_t i = 0; i < reads.size(); ++i) inputs.push_back({line.positional[i], &reads[i].adapter});
  auto plan = compose::PlanCombine(inputs, app::CombineOptionsOf(line));
  if (!plan.ok()) return fail(plan.error());
  AddNamedInputFacts(line, facts);
  if (Status s = app::CheckInputLinks("combine", facts, flags); !s.ok()) return fail(s.error());
  app::CombineReport report{&plan.value(), line.positional, nullptr, dry_run};
  const bool text_out = !json && !line.Has("quiet");

  compose::CombineWriter* written = nullptr;
  std::unique_ptr<compose::CombineWriter> writer;
  if (!dry_run) {
    const auto& output = plan->output;
    std::vector<std::string> names{output.weights_name};
    if (output.config_name) names.push_back(*output.config_name);
    const std::string out_dir = *line.Value("out");
    auto policy = app::PlanOutput("combine", facts, DescribeOutputDirectory("--out", out_dir, names), flags);
    if (!policy.ok()) return fail(policy.error());
    auto transaction = OutputTransaction::Begin(out_dir, std::move(policy.value()));
    if (!transaction.ok()) return fail(transaction.error());
    // The plan is told before the work starts; the outcome follows it.
    if (text_out) {
      std::string text = app::RenderCombinePlanText(report);
      WriteText(stdout, text);
      std::fflush(stdout);
    }
    auto weights = transaction.value()->Add(output.weights_name);
    if (!weights.ok()) return fail(weights.error());
    writer = std::make_unique<compose::CombineWriter>(plan.value(), inputs, *weights.value());
    Status status = writer->Begin();
    if (status.ok()) status = SupplyInputs(*writer, dirs);
    if (status.ok()) status = writer->Finish();
    if (status.ok() && output.config_name) {
      auto config = transaction.value()->Add(*output.config_name);
      status = config.ok() ? config.value()->Write({reinterpret_cast<const uint8_t*>(output.config_text.data()),
                                                    output.config_text.size()})
                           : Status(config.error());
    }
    if (status.ok()) status = transaction.value()->Commit();
    if (!status.ok()) return fail(status.error());
    written = writer.get();
    report.outcomes = &written->outcomes();
  }
  // A dry run's plan is all it prints; a combination's plan was printed before the work.
  std::string out = json      ? app::RenderCombineJson(report)
                    : dry_run ? app::RenderCombinePlanText(report)
                              : app::RenderCombineOutcomeText(report);
  if (json || !line.Has("quiet")) WriteText(stdout, out);
  return 0;
}

}  // namespace pb::cli
