#include "app/combine_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/json.h"

namespace pb::app {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The shortest text that reads back as the same double: the weight as the user wrote it (0.7, not
// 0.69999999999999996), and still exact. (Emscripten 3.1.6's libc++ has no floating-point std::to_chars.)
std::string Weight(double v) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string Files(const compose::CombinePlan& plan) {
  return plan.output.weights_name + (plan.output.config_name ? ", " + *plan.output.config_name : std::string());
}

std::string Ranks(const compose::PlannedModule& m) {
  std::string out;
  for (size_t i = 0; i < m.ranks.size(); ++i) out += (i ? "+" : "") + std::to_string(m.ranks[i]);
  return out;
}

}  // namespace

std::string RenderCombinePlanText(const CombineReport& r) {
  const compose::CombinePlan& p = *r.plan;
  std::string out = std::string(r.dry_run ? "would combine " : "combine ") + std::to_string(r.labels.size()) +
                    " adapter(s) with " + std::string(compose::CombineMethodName(p.options.method)) +
                    (p.options.peft_compat ? " (--peft-compat)" : "") + ": " + std::to_string(p.modules.size()) +
                    " module(s), rank " + std::to_string(p.rank) + ", " + std::string(DtypeName(p.dtype)) + "\n";
  for (size_t i = 0; i < r.labels.size(); ++i) out += "  " + r.labels[i] + " ×" + Weight(p.options.weights[i]) + "\n";
  for (const auto& m : p.modules)
    out += "  " + m.path + ": " + std::to_string(m.inputs.size()) + " adapter(s), rank " + Ranks(m) + " -> " +
           std::to_string(m.rank) + "\n";
  for (const auto& e : p.extras)
    out += "  " + e.key + ": modules_to_save, " + std::to_string(e.inputs.size()) + " adapter(s)\n";
  for (const auto& n : p.notes) out += "note: " + n + "\n";
  if (r.dry_run) out += "would write: " + Files(p) + "\n";
  return out;
}

std::string RenderCombineOutcomeText(const CombineReport& r) {
  const compose::CombinePlan& p = *r.plan;
  std::string out;
  double worst = -1;
  std::string worst_path;
  for (size_t m = 0; m < p.modules.size(); ++m) {
    const compose::ModuleOutcome& o = (*r.outcomes)[m];
    out += "  " + p.modules[m].path + ": relative error " + Number(o.relative_error) +
           (o.kept_energy ? ", energy kept " + Number(100 * *o.kept_energy) + "%" : "") + "\n";
    if (o.relative_error > worst) worst = o.relative_error, worst_path = p.modules[m].path;
  }
  out += "largest relative error " + Number(worst) + " (" + worst_path + ")\n";
  out += "wrote: " + Files(p) + "\n";
  return out;
}

std::string RenderCombineJson(const CombineReport& r) {
  const compose::CombinePlan& p = *r.plan;
  Json j = Json::object();
  j["ok"] = true;
  j["dryRun"] = r.dry_run;
  j["method"] = std::string(compose::CombineMethodName(p.options.method));
  j["peftCompat"] = p.options.peft_compat;
  j["rank"] = p.rank;
  j["dtype"] = std::string(DtypeName(p.dtype));
  j["runtimeScale"] = p.runtime_scale;
  Json inputs = Json::array();
  for (size_t i = 0; i < r.labels.size(); ++i)
    inputs.push_back({{"adapter", r.labels[i]}, {"weight", p.options.weights[i]}});
  j["inputs"] = inputs;
  Json modules = Json::array();
  for (size_t m = 0; m < p.modules.size(); ++m) {
    const auto& pm = p.modules[m];
    Json e = {{"path", pm.path}, {"inputs", pm.inputs}, {"ranks", pm.ranks}, {"rank", pm.rank}};
    const compose::ModuleOutcome* o = r.outcomes ? &(*r.outcomes)[m] : nullptr;
    e["relativeError"] = o ? Json(o->relative_error) : Json(nullptr);
    e["keptEnergy"] = o && o->kept_energy ? Json(*o->kept_energy) : Json(nullptr);
    modules.push_back(e);
  }
  j["modules"] = modules;
  Json extras = Json::array();
  for (const auto& e : p.extras) extras.push_back({{"key", e.key}, {"inputs", e.inputs}});
  j["modulesToSave"] = extras;
  j["notes"] = p.notes;
  Json files = Json::array();
  files.push_back(p.output.weights_name);
  if (p.output.config_name) files.push_back(*p.output.config_name);
  j["files"] = files;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace pb::app
