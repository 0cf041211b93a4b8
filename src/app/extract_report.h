// `extract` for both CLIs and the WASM module: its command-line arguments and usage checks, its help, and the
// texts and JSON it prints (the plan before the work, the outcome after it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "app/command_line.h"
#include "compose/extract_job.h"
#include "compose/model_modules.h"

namespace pb::app {

compose::ExtractArguments ExtractArgumentsOf(const CommandLine& line);
// The usage problem of an `extract` command line (no -o without --dry-run, a bad --rank...), or nullopt.
std::optional<std::string> ExtractUsageProblem(const CommandLine& line);
// `extract --help` up to its "options:" line (the option lines: app/option_tables.h).
std::string_view ExtractHelpIntro();

// "extract: N module(s) to decompose …", a line per module and what is left out: printed before the work
// (and alone with --dry-run).
std::string RenderExtractPlanText(const compose::ExtractPlan& plan, bool dry_run);
// Per decomposed module its rank, kept energy and relative error; the saved modules; "wrote: …".
std::string RenderExtractOutcomeText(const compose::ExtractPlan& plan, const compose::ExtractOutcome& outcome);
// The summary; `outcome` is null for --dry-run.
std::string RenderExtractJson(const compose::ExtractPlan& plan, const compose::ExtractOutcome* outcome);

}  // namespace pb::app
