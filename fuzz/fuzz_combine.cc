// libFuzzer target for `combine`: options JSON + up to three adapters -> PlanCombine -> CombineWriter.
//
// Input: part 0 = the options (combine's JS options, read by app::OptionsCommandLine); then, per adapter (up to 3), a
// part with its safetensors file and a part with its adapter_config.json ("" for none). Compact encoding expanded
// first.
//
// Checks (abort() on failure):
//   - a refused option set, read or plan carries a message;
//   - an accepted plan lists each module once, with ranks that fit, and its reports render (the JSON parses);
//   - writing it (every input held: no byte is asked for) succeeds or fails with a message; on success the file
//     parses (ParseWholeFile) with the planned tensors, the config is one ParseLoraConfig accepts, and every
//     module's relative error is ≥ 0 and finite when every input factor is finite.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "adapter/lora_config.h"
#include "app/combine_args.h"
#include "app/option_tables.h"
#include "app/combine_report.h"
#include "compose/combine_plan.h"
#include "compose/combine_writer.h"
#include "compose/float_values.h"
#include "core/json.h"
#include "core/reader.h"
#include "fuzz_input.h"

namespace {

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_combine: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

struct Sink : pb::ByteSink {
  std::vector<uint8_t> bytes;
  pb::Status Write(std::span<const uint8_t> b) override {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return pb::Status::Ok();
  }
};

// Every factor value finite and moderate, so that every product stays finite in double.
bool AllFinite(const pb::adapter::Adapter& a) {
  for (const auto& m : a.modules)
    for (const auto* t : {&m.a, &m.b}) {
      auto values = pb::compose::MatrixOf(*t);
      if (!values.ok()) return false;
      for (double x : values->data())
        if (!(std::fabs(x) < 1e30)) return false;  // finite, and far from overflowing a product in double
    }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  const auto parts = pb::fuzz::SplitParts(input, 7);
  if (parts.size() < 2) return 0;
  auto options_json = pb::ParseJson(parts[0], "options");
  if (!options_json.ok()) return 0;
  auto line = pb::app::OptionsCommandLine("combine", options_json.value());
  if (!line.ok()) {
    if (line.error().message.empty()) Fail("an option refusal without a message");
    return 0;
  }
  const std::optional<pb::compose::CombineOptions> options = pb::app::CombineOptionsOf(line.value());
  // The methods that form full deltas cost out × in per module: kept small here so a run stays quick.
  const bool dense = pb::compose::IsSvdMethod(options->method) && options->method != pb::compose::CombineMethod::kSvd;

  std::vector<std::string> files, configs;
  std::vector<pb::adapter::ReadResult> reads;
  bool finite = true;
  for (size_t p = 1; p < parts.size() && reads.size() < 3; p += 2) {
    files.emplace_back(parts[p]);
    configs.emplace_back(p + 1 < parts.size() ? std::string(parts[p + 1]) : std::string());
    pb::adapter::AdapterSource source;
    source.weights_name = "adapter_model.safetensors";
    source.weights =
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(files.back().data()), files.back().size());
    if (!configs.back().empty()) source.config = configs.back();
    auto read = pb::adapter::ReadAdapter(source, {});
    if (!read.ok()) {
      if (read.error().message.empty()) Fail("a read refusal without a message");
      return 0;
    }
    for (const auto& m : read->adapter.modules)
      if (dense && m.out_features() * m.in_features() > (1u << 16)) return 0;
    finite = finite && AllFinite(read->adapter);
    reads.push_back(std::move(read.value()));
  }
  std::vector<pb::compose::CombineInput> inputs;
  for (size_t i = 0; i < reads.size(); ++i) inputs.push_back({"adapter " + std::to_string(i + 1), &reads[i].adapter});
  auto plan = pb::compose::PlanCombine(inputs, options.value());
  if (!plan.ok()) {
    if (plan.error().message.empty()) Fail("a plan refusal without a message");
    return 0;
  }
  std::set<std::string> paths;
  for (const auto& m : plan->modules) {
    if (!paths.insert(m.path).second) Fail("a module planned twice", m.path);
    if (m.rank == 0 || m.inputs.empty() || m.inputs.size() != m.ranks.size())
      Fail("a malformed planned module", m.path);
  }
  std::vector<std::string> labels;
  for (const auto& in : inputs) labels.push_back(in.label);
  pb::app::CombineReport report{&plan.value(), labels, nullptr, true};
  (void)pb::app::RenderCombinePlanText(report);
  if (!pb::ParseJson(pb::app::RenderCombineJson(report), "report").ok()) Fail("the plan's JSON does not parse");

  Sink sink;
  pb::compose::CombineWriter writer(plan.value(), inputs, sink);
  pb::Status status = writer.Begin();
  if (status.ok() && !writer.needs().empty()) Fail("held inputs asked for bytes");
  if (status.ok()) status = writer.Finish();
  if (!status.ok()) {
    if (status.error().message.empty()) Fail("a write failure without a message");
    return 0;
  }
  auto file = pb::ParseWholeFile(sink.bytes);
  if (!file.ok()) Fail("the combined file does not parse", file.error().message);
  if (file->tensor_count() != plan->output.weights.tensors.size()) Fail("the combined file's tensor count");
  if (plan->output.config_name && !pb::adapter::ParseLoraConfig(plan->output.config_text).ok())
    Fail("the combined config is refused", plan->output.config_text);
  for (const auto& o : writer.outcomes()) {
    if (!(o.relative_error >= 0) && !std::isnan(o.relative_error)) Fail("a negative relative error");
    if (finite && !std::isfinite(o.relative_error) && !std::isnan(o.relative_error))
      Fail("an infinite error from finite inputs");
  }
  report.outcomes = &writer.outcomes();
  report.dry_run = false;
  (void)pb::app::RenderCombineOutcomeText(report);
  if (!pb::ParseJson(pb::app::RenderCombineJson(report), "report").ok()) Fail("the outcome's JSON does not parse");
  return 0;
}
