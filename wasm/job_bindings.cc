// The one job handle (job/job.h, docs/jobs.md): web/src/job-driver.js runs every command that is a job through it.
// It adapts only: the options arrive as JSON and become the job's, steps leave as plain objects, the bytes a job
// is supplied come through the handle's window and the bytes it writes are read from the heap before the next call.
#include <emscripten/bind.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "app/convert_job.h"
#include "app/option_tables.h"
#include "app/output_policy_json.h"
#include "core/dtype.h"
#include "core/json.h"
#include "handle.h"
#include "job/job.h"

namespace pb::wasm {
namespace {

using emscripten::val;

// convert's options: {"line": a parsed command line} for the npm CLI, or {"dtype", "order"} for convert(); then
// "inputSize" (null for a stream) and "output" (a planOutput request, for a CLI writing a file).
Result<app::ConvertOptions> ConvertOptionsFromJson(const nlohmann::json& j) {
  std::optional<uint64_t> size;
  if (j.contains("inputSize") && j["inputSize"].is_number() && j["inputSize"].get<double>() >= 0)
    size = j["inputSize"].get<uint64_t>();
  app::ConvertOptions options;
  if (j.contains("line")) {
    options = app::ConvertOptionsFromLine(app::CommandLineFromJson(j["line"].dump()), size);
  } else {
    // convert()'s keys, read as the CLI reads its options (app/option_tables.h): one dtype vocabulary.
    PB_ASSIGN_OR_RETURN(Json keys, ParseJson(j.dump(), "convert options"));
    PB_ASSIGN_OR_RETURN(app::CommandLine line, app::OptionsCommandLine("convert", keys));
    if (!line.Value("dtype")) return MakeError(ErrorCode::InvalidArgument, "convert needs a dtype (bf16, f16 or f32)");
    options = app::ConvertOptionsFromLine(line, size);
    options.json = false;
    options.tell_plan = false;
  }
  if (j.contains("output") && j["output"].is_object()) {
    PB_ASSIGN_OR_RETURN(auto request, app::ParseOutputPolicyRequest(j["output"].dump()));
    if (!request.out) return MakeError(ErrorCode::InvalidArgument, "the output check names no output");
    options.output =
        app::ConvertOptions::OutputCheck{std::move(request.inputs), std::move(*request.out), request.flags};
  }
  return options;
}

class JobHandle : public Handle {
 public:
  JobHandle(const std::string& command, const std::string& options_json) {
    const nlohmann::json j = nlohmann::json::parse(options_json, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      Fail(MakeError(ErrorCode::InvalidArgument, "job options are not a JSON object"));
      return;
    }
    if (command != "convert") {
      Fail(MakeError(ErrorCode::InvalidArgument, "no job for `" + command + "`"));
      return;
    }
    auto options = ConvertOptionsFromJson(j);
    if (!options.ok()) {
      Fail(options.error());
      return;
    }
    convert_ = std::make_unique<app::ConvertJob>(std::move(options.value()));
  }
  bool ok() const { return convert_ != nullptr; }

  // The next step as {kind, input, begin, end, output, at, ptr, length, text, done, total}; null on error.
  val next() {
    if (!convert_) return val::null();
    auto step = convert_->Next();
    if (!step.ok()) {
      Fail(step.error());
      return val::null();
    }
    val s = val::object();
    s.set("kind", std::string(job::StepKindName(step->kind)));
    s.set("input", double(step->input));
    s.set("begin", double(step->begin));
    s.set("end", double(step->end));
    s.set("output", double(step->output));
    s.set("at", double(step->at));
    s.set("ptr", double(reinterpret_cast<uintptr_t>(step->bytes.data())));
    s.set("length", double(step->bytes.size()));
    s.set("text", std::string(step->text));
    s.set("done", double(step->done));
    s.set("total", double(step->total));
    return s;
  }
  // The next n bytes of the read asked for, copied into the window; 0: the input ended.
  bool supply(size_t n) {
    auto bytes = Begin(n);
    return bytes && convert_ && Check(convert_->Supply(*bytes));
  }
  std::string output_plan_json() const { return convert_ ? app::RenderOutputPlanJson(convert_->output_plan()) : ""; }
  double output_size() const {
    auto size = convert_ ? convert_->output_size() : std::nullopt;
    return size ? double(*size) : -1;
  }
  std::string summary() const { return convert_ ? convert_->summary() : ""; }

 private:
  // The jobs this handle runs; the next command's job joins here.
  std::unique_ptr<app::ConvertJob> convert_;
};

}  // namespace
}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge_job) {
  using namespace emscripten;
  using namespace pb::wasm;
  class_<JobHandle, base<Handle>>("JobHandle")
      .constructor<std::string, std::string>()
      .function("ok", &JobHandle::ok)
      .function("next", &JobHandle::next)
      .function("supply", &JobHandle::supply)
      .function("outputPlanJson", &JobHandle::output_plan_json)
      .function("outputSize", &JobHandle::output_size)
      .function("summary", &JobHandle::summary);
}
