// `combine`'s texts and JSON, the same bytes from both CLIs: the plan (printed before the work), the outcome
// with each module's relative error against the exact combination (and the energy an SVD kept), and --json.
#pragma once

#include <string>
#include <vector>

#include "compose/combine_plan.h"
#include "compose/combine_writer.h"

namespace pb::app {

struct CombineReport {
  const compose::CombinePlan* plan = nullptr;
  std::vector<std::string> labels;                                // the inputs as given
  const std::vector<compose::ModuleOutcome>* outcomes = nullptr;  // null before the work (or for a dry run)
  bool dry_run = false;
};

std::string RenderCombinePlanText(const CombineReport& report);
std::string RenderCombineOutcomeText(const CombineReport& report);
std::string RenderCombineJson(const CombineReport& report);

}  // namespace pb::app
