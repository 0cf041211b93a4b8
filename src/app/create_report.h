// `create` for both CLIs and the WASM module: its command-line checks (usage errors, exit 2), its help, and
// its reports (plan before the work, outcome after, --json), rendered once here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "app/command_line.h"
#include "compose/create_plan.h"

namespace pb::app {

// The arguments `create` takes from a parsed command line (text, as compose::ParseCreateArguments checks them).
compose::CreateArguments CreateArgumentsOf(const CommandLine& line);

// The usage problem of a `create` command line (no --base, no -o without --dry-run, a bad --r...), or nullopt.
std::optional<std::string> CreateUsageProblem(const CommandLine& line);

// What the config names as the base: --base as given, `owner/repo` for hf://owner/repo[@rev] (and the revision).
struct CreateBaseName {
  std::string name;
  std::optional<std::string> revision;
};
CreateBaseName CreateBaseNameOf(std::string_view base);

// `create --help` up to its "options:" line (the option lines: app/option_tables.h).
std::string_view CreateHelpIntro();

// "create: N LoRA module(s) …" and a line per module: printed before the work (and alone with --dry-run).
std::string RenderCreatePlanText(const compose::CreatePlan& plan, bool dry_run);
// "wrote: adapter_model.safetensors (size), adapter_config.json\n"
std::string RenderCreateOutcomeText(const compose::CreatePlan& plan);
// {"ok":true,"dryRun","arch","r","loraAlpha","scaling","useRslora","useDora","init","seed","dtype","modules":[{"path",
//  "kind","inFeatures","outFeatures"}],"targetModules","files":[{"name","bytes"}],"baseBytesRead","notes"}
std::string RenderCreateJson(const compose::CreatePlan& plan, bool dry_run);

}  // namespace pb::app
