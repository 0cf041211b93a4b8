// Embind layer over `combine` (src/compose): one handle, CombineJob, that JS drives as the native CLI drives the
// core (src/cli/combine_command.cc). For each input: header_length, set_adapter_header, the inline tensors
// (HeaderReadingHandle's steps), then add_input reads it; plan() plans; unless a dry run, begin_write() writes the
// header as output chunks, then needs() lists [input, begin, end] ranges whose bytes supply(n) takes in order (each
// call's output in the chunk table), until needs() is empty; finish_write() ends the file. result() gives the texts.
// Options, as JSON: the JS keys of combine's option table (app/option_tables.h), read as the CLI's options, and
// "namingTables".
#include <emscripten/bind.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "app/combine_args.h"
#include "app/combine_report.h"
#include "app/option_tables.h"
#include "compose/combine_plan.h"
#include "compose/combine_writer.h"
#include "core/json.h"
#include "failure_value.h"
#include "header_reading_handle.h"
#include "naming_tables_option.h"

namespace pb::wasm {
namespace {

using emscripten::val;

class CombineJob : public HeaderReadingHandle {
 public:
  explicit CombineJob(const std::string& options_json) {
    auto parsed = ParseJson(options_json, "combine options");
    const Json j = parsed.ok() ? std::move(parsed.value()) : Json();
    auto line = app::OptionsCommandLine("combine", j);
    if (!line.ok()) {
      Fail(line.error());
      return;
    }
    options_ = app::CombineOptionsOf(line.value());
    if (auto from = line->Value("from")) read_options_.format = adapter::ParseFormatName(*from);  // a table choice
    read_options_.arch = line->Value("arch");
    auto tables = NamingTablesOption(j);
    if (!tables.ok()) {
      Fail(tables.error());
      return;
    }
    tables_ = std::move(tables.value());
    read_options_.tables = tables_.get();
    read_options_.strict = line->Has("strict");
    dry_run_ = line->Has("dry-run");
  }
  bool ok() const { return !error_.has_value(); }

  // Reads the input whose header was just set (window: its inline tensors' bytes); errors name it by `label`.
  bool add_input(size_t n, const std::string& label, const std::string& weights_name, const val& config,
                 const val& base_config) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    if (!adapter_header_) return Fail(MakeError(ErrorCode::InvalidArgument, "the adapter's header was not given"));
    auto input = std::make_unique<Input>();
    input->label = label;
    input->header = std::move(adapter_header_);
    input->gguf = std::move(adapter_gguf_);
    input->config = OptionalText(config);
    input->base_config = OptionalText(base_config);
    input->inline_bytes.assign(bytes->begin(), bytes->end());
    adapter::AdapterSource source{
        weights_name,     {}, input->config, input->base_config, input->header.get(), input->inline_bytes,
        input->gguf.get()};
    auto read = adapter::ReadAdapter(source, read_options_);
    if (!read.ok()) return FailNamed(label, read.error());
    input->read = std::move(read.value());
    inputs_.push_back(std::move(input));
    return true;
  }

  bool plan() {
    chunks_.Clear();
    combine_inputs_.clear();
    for (const auto& in : inputs_) combine_inputs_.push_back({in->label, &in->read.adapter});
    auto plan = compose::PlanCombine(combine_inputs_, options_);
    if (!plan.ok()) return Fail(plan.error());
    plan_ = std::make_unique<compose::CombinePlan>(std::move(plan.value()));
    return true;
  }

  bool begin_write() {
    chunks_.Clear();
    if (!plan_) return Fail(MakeError(ErrorCode::InvalidArgument, "begin_write before plan"));
    writer_ = std::make_unique<compose::CombineWriter>(*plan_, combine_inputs_, chunks_);
    return Check(writer_->Begin());
  }
  // [[input, begin, end], ...]
  std::string needs() const {
    nlohmann::json j = nlohmann::json::array();
    if (writer_)
      for (const auto& r : writer_->needs()) j.push_back({r.input, r.range.begin, r.range.end});
    return j.dump();
  }
  bool supply(size_t n) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    if (!writer_) return Fail(MakeError(ErrorCode::InvalidArgument, "input bytes before begin_write"));
    return Check(writer_->Supply(*bytes));
  }
  bool finish_write() {
    chunks_.Clear();
    if (!writer_) return Fail(MakeError(ErrorCode::InvalidArgument, "finish_write before begin_write"));
    if (!Check(writer_->Finish())) return false;
    written_ = true;
    return true;
  }

  // {plan (the text printed before the work), text (a dry run's, or plan + outcome once written), outcome, json,
  //  weightsName, config: {name, bytes}}
  val result() const {
    val r = val::object();
    if (!plan_) return r;
    std::vector<std::string> labels;
    for (const auto& in : inputs_) labels.push_back(in->label);
    app::CombineReport report{plan_.get(), labels, written_ ? &writer_->outcomes() : nullptr, dry_run_};
    r.set("plan", app::RenderCombinePlanText(report));
    r.set("outcome", written_ ? app::RenderCombineOutcomeText(report) : std::string());
    r.set("text", dry_run_ || !written_ ? app::RenderCombinePlanText(report)
                                        : app::RenderCombinePlanText(report) + app::RenderCombineOutcomeText(report));
    r.set("json", app::RenderCombineJson(report));
    SetOutputFiles(r, plan_->output);
    return r;
  }

 private:
  struct Input {
    std::string label;
    std::unique_ptr<Header> header;
    std::unique_ptr<gguf::GgufFile> gguf;
    std::optional<std::string> config, base_config;
    std::vector<uint8_t> inline_bytes;
    adapter::ReadResult read;
  };
  compose::CombineOptions options_;
  adapter::ReadOptions read_options_;
  std::shared_ptr<const adapter::NamingTables> tables_;
  bool dry_run_ = false, written_ = false;
  std::vector<std::unique_ptr<Input>> inputs_;
  std::vector<compose::CombineInput> combine_inputs_;
  std::unique_ptr<compose::CombinePlan> plan_;
  std::unique_ptr<compose::CombineWriter> writer_;
};

// The typed options of an npm CLI command line ({options: {name: [values]}}, as parseCommandLine gives it), read
// by the same code as the native CLI's (app::CombineOptionsOf): {ok, optionsJson}.
val CombineOptionsFromLine(const std::string& line_json) {
  auto parsed = ParseJson(line_json, "command line");
  app::CommandLine line;
  const Json* options = parsed.ok() && parsed->is_object() && parsed->contains("options") ? &parsed.value()["options"]
                                                                                          : nullptr;
  if (options && options->is_object())
    for (const auto& [name, values] : options->items())
      if (values.is_array())
        for (const auto& v : values)
          if (v.is_string()) line.options[name].push_back(v.get<std::string>());
  if (auto bad = app::CheckCombineNumbers(line)) return FailureValue(MakeError(ErrorCode::InvalidArgument, *bad));
  val r = val::object();
  r.set("ok", true);
  r.set("optionsJson", app::CombineOptionsToJson(app::CombineOptionsOf(line)).dump());
  return r;
}

}  // namespace
}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge_combine) {
  using namespace emscripten;
  using pb::wasm::CombineJob;
  class_<CombineJob, base<pb::wasm::HeaderReadingHandle>>("CombineJob")
      .constructor<std::string>()
      .function("ok", &CombineJob::ok)
      .function("addInput", &CombineJob::add_input)
      .function("plan", &CombineJob::plan)
      .function("beginWrite", &CombineJob::begin_write)
      .function("needs", &CombineJob::needs)
      .function("supply", &CombineJob::supply)
      .function("finishWrite", &CombineJob::finish_write)
      .function("result", &CombineJob::result);
  function("combineOptionsFromLine", &pb::wasm::CombineOptionsFromLine);
}
