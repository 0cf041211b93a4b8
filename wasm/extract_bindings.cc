// Embind layer over `extract` (src/compose/extract_*): one handle, ExtractJob, that JS drives as the native CLI
// drives the core (src/cli/extract_command.cc), with wasm/bindings.cc's conventions (window in, chunk table out,
// false + errorJson on failure).
//
// JS reads both models with the Merger's steps (setIndex, indexShards, headerLength, addShard, baseComplete), for
// the base after useModel(false) and for the tuned model after useModel(true), so the npm CLI opens each model as
// merge opens a base; plan(baseConfig, tunedConfig) plans. Unless a dry run, start() begins the job; then, while
// nextRead() names a range ({tuned, shard, begin, end}), JS pushes its bytes with push(n), in pieces of any size,
// and copies out the chunks of adapter_model.safetensors' data region each push wrote; finish() makes the header
// (header(): exactly reservedHeader bytes, which go in front of the data) and adapter_config.json (config()).
// Options, as JSON: {"rank", "energy", "maxRank", "modules", "embeddings", "dtype" (the CLI's strings, checked by
// compose::ParseExtractArguments), "arch", "base" (what the config records, as the CLI's --base), "revision":
// strings or null; "namingTables"}.
#include <emscripten/bind.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/create_report.h"
#include "app/extract_report.h"
#include "app/option_tables.h"
#include "compose/extract_job.h"
#include "compose/extract_plan.h"
#include "core/header.h"
#include "core/json.h"
#include "merge/model_index.h"
#include "header_reading_handle.h"
#include "naming_tables_option.h"

namespace pb::wasm {
namespace {

using emscripten::val;

class ExtractHandle : public HeaderReadingHandle {  // HeaderReadingHandle: headerLength, as the Merger reads a base
 public:
  explicit ExtractHandle(const std::string& options_json) {
    auto parsed = ParseJson(options_json, "extract options");
    const Json j = parsed.ok() ? std::move(parsed.value()) : Json();
    auto line = app::OptionsCommandLine("extract", j);  // the CLI's options, read as the CLI reads them
    if (!line.ok()) {
      Fail(line.error());
      return;
    }
    auto options = compose::ParseExtractArguments(app::ExtractArgumentsOf(line.value()));
    if (!options.ok()) {
      Fail(options.error());
      return;
    }
    options_ = std::move(options.value());
    options_.arch = line->Value("arch");
    auto text = [&](const char* key) -> std::optional<std::string> {  // the keys only the JS API has
      if (!j.contains(key) || !j[key].is_string()) return std::nullopt;
      return j[key].get<std::string>();
    };
    if (auto base = text("base")) {  // as the native CLI names the base from --base
      auto name = app::CreateBaseNameOf(*base);
      options_.base_name_or_path = name.name;
      options_.revision = name.revision;
    }
    if (auto revision = text("revision")) options_.revision = revision;
    auto tables = NamingTablesOption(j);
    if (!tables.ok()) {
      Fail(tables.error());
      return;
    }
    tables_ = std::move(tables.value());
    options_.tables = tables_.get();
  }
  bool ok() const { return !error_.has_value(); }

  // Which model the next setIndex / addShard / baseComplete read.
  void use_model(bool tuned) { current_ = tuned ? &tuned_ : &base_; }

  bool set_index(const std::string& text) {
    auto index = merge::ParseModelIndex(text);
    if (!index.ok()) return Fail(index.error());
    current_->index = std::move(index.value());
    return true;
  }
  std::string index_shards() const {
    return current_->index ? nlohmann::json(current_->index->shard_names).dump() : "[]";
  }
  bool add_shard(size_t n, const std::string& name, double file_size) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    auto header = HeaderFrom(*bytes, KnownSize(file_size));  // checked as the native CLI checks a shard
    if (!header.ok()) return FailNamed(name, header.error());
    current_->names.push_back(name);
    current_->headers.push_back(std::make_unique<Header>(std::move(header.value())));
    return true;
  }
  bool base_complete() {
    if (!current_->index) return true;
    std::vector<merge::BaseShardHeader> shards;
    for (size_t i = 0; i < current_->headers.size(); ++i)
      shards.push_back({current_->names[i], current_->headers[i].get()});
    return Check(merge::CheckIndexAgainstShards(*current_->index, shards));
  }

  // Plans from both models' headers; the configs: config.json texts, or null.
  bool plan(const val& base_config, const val& tuned_config) {
    auto plan = compose::PlanExtract(base_.Shards(), tuned_.Shards(), OptionalText(base_config),
                                     OptionalText(tuned_config), options_);
    if (!plan.ok()) return Fail(plan.error());
    plan_ = std::make_unique<compose::ExtractPlan>(std::move(plan.value()));
    return true;
  }
  // {"readBytes", "reservedHeader", "weightsName", "configName", "modules"}
  std::string plan_json() const {
    if (!plan_) return "";
    nlohmann::json j = {{"readBytes", plan_->read_bytes},
                        {"reservedHeader", plan_->reserved_header},
                        {"weightsName", std::string(compose::kExtractWeightsName)},
                        {"configName", std::string(compose::kExtractConfigName)},
                        {"modules", plan_->modules.size()}};
    return j.dump();
  }
  // The text printed before the work (alone for a dry run), or a dry run's JSON.
  std::string plan_text(bool dry_run) const { return plan_ ? app::RenderExtractPlanText(*plan_, dry_run) : ""; }
  std::string dry_run_json() const { return plan_ ? app::RenderExtractJson(*plan_, nullptr) : ""; }

  bool start() {
    chunks_.Clear();
    if (!plan_) return Fail(MakeError(ErrorCode::InvalidArgument, "start before plan"));
    job_ = std::make_unique<compose::ExtractJob>(*plan_, chunks_);
    return true;
  }
  // {tuned, shard (its position among the model's addShard calls), name, begin, end}, or null when done.
  val next_read() const {
    if (!job_) return val::null();
    auto read = job_->NextRead();
    if (!read) return val::null();
    const Model& model = read->tuned ? tuned_ : base_;
    val r = val::object();
    r.set("tuned", read->tuned);
    r.set("shard", double(read->shard));
    r.set("name", model.names.at(read->shard));
    r.set("begin", double(read->begin));
    r.set("end", double(read->end));
    return r;
  }
  // The next n bytes of nextRead()'s range; the data the job wrote meanwhile is in the chunk table.
  bool push(size_t n) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    if (!job_) return Fail(MakeError(ErrorCode::InvalidArgument, "push before start"));
    return Check(job_->Push(*bytes));
  }
  double bytes_read() const { return job_ ? double(job_->bytes_read()) : 0; }
  double modules_done() const { return job_ ? double(job_->modules_done()) : 0; }

  bool finish() {
    chunks_.Clear();
    if (!job_) return Fail(MakeError(ErrorCode::InvalidArgument, "finish before start"));
    auto outcome = job_->Finish();
    if (!outcome.ok()) return Fail(outcome.error());
    outcome_ = std::make_unique<compose::ExtractOutcome>(std::move(outcome.value()));
    return true;
  }
  // After finish(): the header region's bytes (a copy), adapter_config.json, and the outcome as the CLI prints it.
  val header() const {
    if (!outcome_) return val::null();
    const std::string& h = outcome_->header;
    return val::global("Uint8Array")
        .new_(emscripten::typed_memory_view(h.size(), reinterpret_cast<const uint8_t*>(h.data())));
  }
  std::string config() const { return outcome_ ? outcome_->config_text : ""; }
  std::string outcome_text() const { return outcome_ ? app::RenderExtractOutcomeText(*plan_, *outcome_) : ""; }
  std::string outcome_json() const { return outcome_ ? app::RenderExtractJson(*plan_, outcome_.get()) : ""; }

 private:
  struct Model {
    std::optional<merge::ModelIndex> index;
    std::vector<std::string> names;
    std::vector<std::unique_ptr<Header>> headers;
    std::vector<compose::ExtractShard> Shards() const {
      std::vector<compose::ExtractShard> shards;
      for (size_t i = 0; i < headers.size(); ++i) shards.push_back({names[i], headers[i].get()});
      return shards;
    }
  };
  compose::ExtractOptions options_;
  std::shared_ptr<const adapter::NamingTables> tables_;
  Model base_, tuned_;
  Model* current_ = &base_;
  std::unique_ptr<compose::ExtractPlan> plan_;
  std::unique_ptr<compose::ExtractJob> job_;
  std::unique_ptr<compose::ExtractOutcome> outcome_;
};

}  // namespace

EMSCRIPTEN_BINDINGS(peft_bridge_extract) {
  using emscripten::base;
  using emscripten::class_;
  class_<ExtractHandle, base<pb::wasm::HeaderReadingHandle>>("ExtractJob")
      .constructor<std::string>()
      .function("ok", &ExtractHandle::ok)
      .function("useModel", &ExtractHandle::use_model)
      .function("setIndex", &ExtractHandle::set_index)
      .function("indexShards", &ExtractHandle::index_shards)
      .function("addShard", &ExtractHandle::add_shard)
      .function("baseComplete", &ExtractHandle::base_complete)
      .function("plan", &ExtractHandle::plan)
      .function("planJson", &ExtractHandle::plan_json)
      .function("planText", &ExtractHandle::plan_text)
      .function("dryRunJson", &ExtractHandle::dry_run_json)
      .function("start", &ExtractHandle::start)
      .function("nextRead", &ExtractHandle::next_read)
      .function("push", &ExtractHandle::push)
      .function("bytesRead", &ExtractHandle::bytes_read)
      .function("modulesDone", &ExtractHandle::modules_done)
      .function("finish", &ExtractHandle::finish)
      .function("header", &ExtractHandle::header)
      .function("config", &ExtractHandle::config)
      .function("outcomeText", &ExtractHandle::outcome_text)
      .function("outcomeJson", &ExtractHandle::outcome_json);
}

}  // namespace pb::wasm
