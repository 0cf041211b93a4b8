// The one job handle (job/job.h, docs/jobs.md): web/src/job-driver.js runs every command that is a job through it.
// It adapts only: the options arrive as JSON (parsed once) and become the job's, steps leave as plain objects, the
// bytes a job is supplied come through the handle's window and the bytes it writes are read from the heap before
// the next call.
#include <emscripten/bind.h>

#include <memory>
#include <string>

#include "adapter/format_table.h"
#include "app/command_job.h"
#include "app/convert_job.h"
#include "app/option_tables.h"
#include "app/output_policy_json.h"
#include "app/translate_job.h"
#include "app/translate_output.h"
#include "core/dtype.h"
#include "core/json.h"
#include "handle.h"
#include "job/job.h"
#include "naming_tables_option.h"

namespace pb::wasm {
namespace {

using emscripten::val;

std::optional<uint64_t> SizeOf(const Json& j, const char* key) {
  if (j.contains(key) && j[key].is_number() && j[key].get<double>() >= 0) return j[key].get<uint64_t>();
  return std::nullopt;
}

std::string TextOf(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// "output": a planOutput request (inputs, out, force, followLinks), for a CLI writing files.
Result<std::optional<app::OutputPolicyRequest>> OutputCheckOf(const Json& j) {
  if (!j.contains("output") || !j["output"].is_object()) return std::optional<app::OutputPolicyRequest>();
  PB_ASSIGN_OR_RETURN(auto request, app::OutputPolicyRequestOf(j["output"]));
  return std::optional(std::move(request));
}

// convert's options: {"line": a parsed command line} for the npm CLI, or {"dtype", "order"} for convert(); then
// "inputSize" (null for a stream) and "output" (a planOutput request, for a CLI writing a file).
Result<std::unique_ptr<app::CommandJob>> ConvertJobOf(const Json& j) {
  const std::optional<uint64_t> size = SizeOf(j, "inputSize");
  app::ConvertOptions options;
  if (j.contains("line")) {
    options = app::ConvertOptionsFromLine(app::CommandLineOf(j["line"]), size);
  } else {
    // convert()'s keys, read as the CLI reads its options (app/option_tables.h): one dtype vocabulary.
    PB_ASSIGN_OR_RETURN(app::CommandLine line, app::OptionsCommandLine("convert", j));
    if (!line.Value("dtype")) return MakeError(ErrorCode::InvalidArgument, "convert needs a dtype (bf16, f16 or f32)");
    options = app::ConvertOptionsFromLine(line, size);
    options.json = false;
    options.tell_plan = false;
  }
  PB_ASSIGN_OR_RETURN(auto request, OutputCheckOf(j));
  if (request) {
    if (!request->out) return MakeError(ErrorCode::InvalidArgument, "the output check names no output");
    options.output =
        app::ConvertOptions::OutputCheck{std::move(request->inputs), std::move(*request->out), request->flags};
  }
  return std::unique_ptr<app::CommandJob>(std::make_unique<app::ConvertJob>(std::move(options)));
}

// adapter-info's and translate's options: {"line": a parsed command line} for the npm CLI, or the JS keys of
// translate's option table (app/option_tables.h, adapter-info's options included) for adapterInfo() and
// translateAdapter(), whose summary is the JSON document; then "namingTables", "weightsName", "weightsSize",
// "configSize" and "baseConfigSize" (inputs 1 and 2, null when absent), "baseConfigNote", "baseConfigHint" (the
// caller's app::ChooseBaseConfig) and "output" (a planOutput request, for the npm CLI).
Result<std::unique_ptr<app::CommandJob>> TranslateJobOf(const Json& j, bool info) {
  app::TranslateOptions options;
  if (j.contains("line")) {
    options = app::TranslateOptionsFromLine(app::CommandLineOf(j["line"]), info);
  } else {
    PB_ASSIGN_OR_RETURN(app::CommandLine line, app::OptionsCommandLine("translate", j));
    if (!info && !line.Value("to")) return MakeError(ErrorCode::InvalidArgument, "to: a target format is required");
    options = app::TranslateOptionsFromLine(line, info);
    options.json = true;
  }
  PB_ASSIGN_OR_RETURN(options.tables, NamingTablesOption(j));
  options.weights_name = TextOf(j, "weightsName");
  options.weights_size = SizeOf(j, "weightsSize").value_or(0);
  options.config_size = SizeOf(j, "configSize");
  options.base_config_size = SizeOf(j, "baseConfigSize");
  options.write.base_config_note = TextOf(j, "baseConfigNote");
  options.write.base_config_hint = TextOf(j, "baseConfigHint");
  PB_ASSIGN_OR_RETURN(auto request, OutputCheckOf(j));
  if (request)
    options.output =
        app::TranslateOptions::OutputCheck{std::move(request->inputs), std::move(request->out), request->flags};
  return std::unique_ptr<app::CommandJob>(std::make_unique<app::TranslateJob>(std::move(options)));
}

// The one factory: a command's name and its options, the job.
Result<std::unique_ptr<app::CommandJob>> OpenJob(const std::string& command, const std::string& options_json) {
  PB_ASSIGN_OR_RETURN(Json j, ParseJson(options_json, "job options"));
  if (!j.is_object()) return MakeError(ErrorCode::InvalidArgument, "job options are not a JSON object");
  if (command == "convert") return ConvertJobOf(j);
  if (command == "translate" || command == "adapter-info") return TranslateJobOf(j, command == "adapter-info");
  return MakeError(ErrorCode::InvalidArgument, "no job for `" + command + "`");
}

class JobHandle : public Handle {
 public:
  JobHandle(const std::string& command, const std::string& options_json) {
    auto job = OpenJob(command, options_json);
    if (!job.ok()) {
      Fail(job.error());
      return;
    }
    job_ = std::move(job.value());
  }
  bool ok() const { return job_ != nullptr; }

  // The next step as {kind, input, begin, end, output, at, ptr, length, text, warning, done, total}; null on error.
  val next() {
    if (!job_) return val::null();
    auto step = job_->Next();
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
    s.set("warning", step->warning);
    s.set("done", double(step->done));
    s.set("total", double(step->total));
    return s;
  }
  // The next n bytes of the read asked for, copied into the window; 0: the input ended.
  bool supply(size_t n) {
    auto bytes = Begin(n);
    return bytes && job_ && Check(job_->Supply(*bytes));
  }
  std::string output_plan_json() const { return job_ ? app::RenderOutputPlanJson(job_->output_plan()) : ""; }
  // The outputs' names as a JSON array, once planned.
  std::string output_names_json() const {
    Json names = Json::array();
    if (job_)
      for (const auto& n : job_->output_names()) names.push_back(n);
    return names.dump();
  }
  double output_size() const {
    auto size = job_ ? job_->output_size() : std::nullopt;
    return size ? double(*size) : -1;
  }
  std::string summary() const { return job_ ? job_->summary() : ""; }

 private:
  std::unique_ptr<app::CommandJob> job_;
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
      .function("outputNamesJson", &JobHandle::output_names_json)
      .function("outputSize", &JobHandle::output_size)
      .function("summary", &JobHandle::summary);
  // The npm CLI's translate OUT: one .gguf file or a directory (app/translate_output.h).
  function(
      "translateOutputIsFile", +[](const std::string& to, const std::string& out) {
        auto format = pb::adapter::ParseFormatName(to);
        return format && pb::app::TranslateOutputIsFile(*format, out);
      });
  // The files translate writes into OUT, in order (app/translate_output.h), as a JSON array; [] for an unknown format.
  function(
      "translateOutputNames", +[](const std::string& to, const std::string& out) {
        pb::Json names = pb::Json::array();
        if (auto format = pb::adapter::ParseFormatName(to))
          for (const auto& n : pb::app::TranslateOutputNames(*format, out)) names.push_back(n);
        return names.dump();
      });
}
