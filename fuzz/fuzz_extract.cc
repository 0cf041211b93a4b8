// libFuzzer target for `extract`: options + a base and a tuned safetensors file (+ config.json) -> PlanExtract ->
// ExtractJob -> the adapter.
//
// Input: part 0 = the options as a JSON object of strings {"rank", "energy", "max_rank", "modules",
// "embeddings", "dtype"} (what both CLIs pass to compose::ParseExtractArguments); part 1 = the base's
// safetensors file; part 2 = the tuned model's; part 3 = a config.json for both ("" for none). Compact encoding
// expanded first.
//
// Checks (abort() on failure):
//   - a refused option set, header, plan, job or finish carries a message;
//   - an accepted plan: every decomposed module's rank bound is ≥ 1 and ≤ its smaller side, the reserved
//     header region holds at least the length prefix; its texts render and its JSON parses;
//   - the job asks only for ranges inside the files; pushing them whole and in 1–7-byte chunks gives the same
//     bytes and outcome; a finished adapter's header is exactly the reserved region, the file (header + data)
//     parses with every written tensor, the config is one ParseLoraConfig accepts, and every module's error and
//     kept energy are in [0, 1].
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "adapter/lora_config.h"
#include "app/extract_report.h"
#include "compose/extract_job.h"
#include "compose/extract_plan.h"
#include "core/json.h"
#include "core/reader.h"
#include "fuzz_input.h"

namespace {

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_extract: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

struct Sink : pb::ByteSink {
  std::vector<uint8_t> bytes;
  pb::Status Write(std::span<const uint8_t> b) override {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return pb::Status::Ok();
  }
};

struct Run {
  bool ok = false;
  std::string error;
  std::vector<uint8_t> file;
  std::string config;
};

Run Extract(const pb::compose::ExtractPlan& plan, std::string_view base, std::string_view tuned, size_t chunk) {
  Run run;
  Sink sink;
  pb::compose::ExtractJob job(plan, sink);
  uint64_t turn = 0;
  while (auto read = job.NextRead()) {
    std::string_view file = read->tuned ? tuned : base;
    if (read->begin > read->end || read->end > file.size()) Fail("a range outside the file");
    uint64_t at = read->begin;
    while (at < read->end) {
      uint64_t n = chunk == 0 ? read->end - at : std::min<uint64_t>(read->end - at, 1 + (turn++ * 2654435761u) % chunk);
      pb::Status s = job.Push({reinterpret_cast<const uint8_t*>(file.data()) + at, size_t(n)});
      if (!s.ok()) {
        if (s.error().message.empty()) Fail("a push failure without a message");
        run.error = s.error().message;
        return run;
      }
      at += n;
    }
  }
  auto outcome = job.Finish();
  if (!outcome.ok()) {
    if (outcome.error().message.empty()) Fail("a finish failure without a message");
    run.error = outcome.error().message;
    return run;
  }
  if (outcome->header.size() != plan.reserved_header) Fail("the header is not the reserved size");
  run.ok = true;
  run.file.assign(outcome->header.begin(), outcome->header.end());
  run.file.insert(run.file.end(), sink.bytes.begin(), sink.bytes.end());
  run.config = outcome->config_text;
  for (const auto& r : outcome->modules)
    if (!(r.relative_error >= 0 && r.relative_error <= 1 + 1e-9) || !(r.energy_kept >= 0 && r.energy_kept <= 1))
      Fail("a module's error or kept energy outside [0, 1]", r.path);
  (void)pb::app::RenderExtractOutcomeText(plan, outcome.value());
  if (!pb::ParseJson(pb::app::RenderExtractJson(plan, &outcome.value()), "report").ok())
    Fail("the outcome's JSON does not parse");
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  const auto parts = pb::fuzz::SplitParts(input, 4);
  if (parts.size() < 3) return 0;
  auto options_json = pb::ParseJson(parts[0], "options");
  if (!options_json.ok() || !options_json->is_object()) return 0;
  pb::compose::ExtractArguments args;
  auto text = [&](const char* key, std::optional<std::string>& out) {
    const pb::Json& o = options_json.value();
    if (o.contains(key) && o[key].is_string()) out = o[key].get<std::string>();
  };
  text("rank", args.rank);
  text("energy", args.energy);
  text("max_rank", args.max_rank);
  text("modules", args.modules);
  text("embeddings", args.embeddings);
  text("dtype", args.dtype);
  auto options = pb::compose::ParseExtractArguments(args);
  if (!options.ok()) {
    if (options.error().message.empty()) Fail("an option refusal without a message");
    return 0;
  }
  const std::string_view base(parts[1]), tuned(parts[2]);
  auto base_header = pb::ParseWholeFile({reinterpret_cast<const uint8_t*>(base.data()), base.size()});
  auto tuned_header = pb::ParseWholeFile({reinterpret_cast<const uint8_t*>(tuned.data()), tuned.size()});
  if (!base_header.ok() || !tuned_header.ok()) return 0;
  std::optional<std::string> config;
  if (parts.size() > 3 && !parts[3].empty()) config = std::string(parts[3]);
  auto plan = pb::compose::PlanExtract({{"model.safetensors", &base_header.value()}},
                                       {{"model.safetensors", &tuned_header.value()}}, config, config, options.value());
  if (!plan.ok()) {
    if (plan.error().message.empty()) Fail("a plan refusal without a message");
    return 0;
  }
  if (plan->reserved_header < 8) Fail("no reserved header region");
  for (const auto& m : plan->modules) {
    if (m.kind == pb::compose::ExtractKind::kSave) continue;
    if (m.max_rank == 0 || m.max_rank > std::min(m.rows, m.cols))
      Fail("a rank bound outside [1, smaller side]", m.path);
    if (m.rows * m.cols > (1u << 16)) return 0;  // the SVD of large deltas: kept out so a run stays quick
  }
  (void)pb::app::RenderExtractPlanText(plan.value(), true);
  if (!pb::ParseJson(pb::app::RenderExtractJson(plan.value(), nullptr), "report").ok())
    Fail("the plan's JSON does not parse");

  Run whole = Extract(plan.value(), base, tuned, 0);
  if (base.size() + tuned.size() <= (1u << 16)) {
    Run chunked = Extract(plan.value(), base, tuned, 7);
    if (chunked.ok != whole.ok || chunked.file != whole.file || chunked.config != whole.config ||
        chunked.error != whole.error)
      Fail("chunked pushes changed the result", whole.error + " / " + chunked.error);
  }
  if (!whole.ok) return 0;
  auto file = pb::ParseWholeFile(whole.file);
  if (!file.ok()) Fail("the extracted file does not parse", file.error().message);
  if (!pb::adapter::ParseLoraConfig(whole.config).ok()) Fail("the extracted config is refused", whole.config);
  return 0;
}
