// The output policy's facts and plan as JSON, for the npm CLI: it gathers the facts with Node's fs, the WASM
// module decides with the same code as the native CLI (app/output_policy.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/base_extras.h"
#include "app/output_policy.h"
#include "core/json.h"

namespace pb::app {

// {"command", "inputs": [{"label","path","real","entry","id","directory","within"(string|null),"withinPath"}],
//  "out": null |
//  {"label","path","real","exists","listing":[{"name","kind":"file|directory|symlink|other","id","targetId"}],
//                 "writes":[names],"singleFile"}, "force", "followLinks"}
// With "out": null only the input links are checked. Returns the plan as
// {"commit":[...],"replace":[...],"remove":[...],"stale":[...]} (all empty without "out"), or the policy's refusal.
Result<std::string> PlanOutputJson(const std::string& request);

// The request above, parsed (what PlanOutputJson decides on; jobs take it as their output check).
struct OutputPolicyRequest {
  std::string command;
  std::vector<InputFact> inputs;
  std::optional<OutputRequest> out;
  OutputFlags flags;
};
Result<OutputPolicyRequest> ParseOutputPolicyRequest(const std::string& request);
// The same, already parsed (a job's options hold it).
Result<OutputPolicyRequest> OutputPolicyRequestOf(const Json& request);
// A plan as PlanOutputJson returns it.
std::string RenderOutputPlanJson(const OutputPlan& plan);

// A command line as the npm CLI's parseCommandLine gives it ({command, positional, options: {name: [values]}});
// anything else reads as an empty line.
CommandLine CommandLineFromJson(const std::string& line_json);
CommandLine CommandLineOf(const Json& line);

// A command line as parseCommandLine gives it ({"command","positional","options":{name:[values]}}): NamedInputs as
// [{"label","path"}].
Result<std::string> NamedInputsJson(const std::string& line_json);

// {"renames":[{"temp","final"}],"remove":[names],"asides":[names]}: the journal's text (RenderCommitJournal).
Result<std::string> RenderCommitJournalJson(const std::string& request);
// The journal `text` read from `path`, as the JSON above, or ParseCommitJournal's refusal.
Result<std::string> ParseCommitJournalJson(const std::string& text, const std::string& path);

// {"basePath", "baseIsDirectory", "listing": [{"name","kind"}], "written": [names], "writesConfig", "copyExtra"}:
// PlanExtraFiles as {"copy": [names], "warnings": text}.
Result<std::string> PlanExtraFilesJson(const std::string& request);

}  // namespace pb::app
