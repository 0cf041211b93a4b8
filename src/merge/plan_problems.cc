#include "merge/plan_problems.h"

#include <algorithm>

namespace pb::merge {

std::string MissingModulesHeadline(const ModelFacts& facts, size_t missing) {
  std::string adapter;
  if (facts.adapter_base) adapter = "adapter trained on " + *facts.adapter_base;
  if (facts.adapter_arch)
    adapter += adapter.empty() ? "adapter for " + *facts.adapter_arch : " (" + *facts.adapter_arch + ")";
  const std::string base = facts.base_arch ? "base is " + *facts.base_arch : "";
  const size_t total = std::max(facts.adapter_modules, missing);
  const std::string count = std::to_string(total - missing) + " of " + std::to_string(total);
  // Each side is named when something is known about it; the count says what was looked for where.
  if (!adapter.empty() && !base.empty()) return adapter + "; " + base + ": " + count + " modules found";
  if (!adapter.empty()) return adapter + ": " + count + " modules found in the base";
  if (!base.empty()) return base + ": " + count + " adapter modules found";
  return count + " adapter modules found in the base";
}

Error PlanProblemsError(std::vector<Problem> problems, const ModelFacts& facts) {
  size_t missing = 0, refusals = 0, base = 0;
  for (const Problem& p : problems) {
    missing += p.code == ErrorCode::ModulesNotFound;
    refusals += p.code == ErrorCode::UnsupportedAdapter;
    base += p.code == ErrorCode::UnsupportedBase;
  }
  ErrorCode code = missing                              ? ErrorCode::ModulesNotFound
                   : base == problems.size()            ? ErrorCode::UnsupportedBase
                   : refusals + base == problems.size() ? ErrorCode::UnsupportedAdapter
                                                        : ErrorCode::ShapeMismatch;
  std::string message = missing
                            ? MissingModulesHeadline(facts, missing)
                            : std::to_string(problems.size()) + " problem(s) between the base model and the adapter";
  message += ":";
  // The missing modules first: when the base is the wrong model they are the news, the rest follows from it.
  std::stable_partition(problems.begin(), problems.end(),
                        [](const Problem& p) { return p.code == ErrorCode::ModulesNotFound; });
  const size_t listed = std::min(problems.size(), kListedProblems);
  for (size_t i = 0; i < listed; ++i) message += "\n  " + problems[i].message;
  if (problems.size() > listed) message += "\n  and " + std::to_string(problems.size() - listed) + " more";
  Error e = MakeError(code, std::move(message));
  e.problems = std::move(problems);
  return e;
}

}  // namespace pb::merge
