// Embind layer over `create` (src/compose/create_*): one handle, AdapterCreator, that adapts the core to JS with
// wasm/bindings.cc's conventions (window in, chunk table out, false + errorJson on failure).
//
// JS gives it the base's index (if any) and each shard's header, with the same method names as the Merger
// (setIndex, indexShards, headerLength, addShard, baseComplete), so the npm CLI opens a base for create exactly
// as for merge; then plan(baseConfig) plans the adapter; ranges() lists the base bytes DoRA needs, supplied in
// order with supplyBase(n); begin() gives the header, next() one tensor at a time, finish() the end.
#include <emscripten/bind.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/command_line.h"
#include "app/create_report.h"
#include "app/option_tables.h"
#include "compose/create_plan.h"
#include "compose/create_writer.h"
#include "core/header.h"
#include "core/json.h"
#include "handle.h"
#include "header_reading_handle.h"
#include "merge/model_index.h"
#include "naming_tables_option.h"

namespace pb::wasm {
namespace {

using emscripten::val;

// Options as JSON: {"targetModules", "targetRegex", "r", "alpha", "seed", "init", "dtype", "arch", "base"
// (the name the config records), "revision": strings or null; "rslora", "dora": booleans; "namingTables"}.
class AdapterCreator : public HeaderReadingHandle {  // HeaderReadingHandle: headerLength, as the Merger reads a base
 public:
  explicit AdapterCreator(const std::string& options_json) {
    auto parsed = ParseJson(options_json, "create options");
    const Json j = parsed.ok() ? std::move(parsed.value()) : Json();
    auto line = app::OptionsCommandLine("create", j);  // the CLI's options, read as the CLI reads them
    if (!line.ok()) {
      Fail(line.error());
      return;
    }
    auto options = compose::ParseCreateArguments(app::CreateArgumentsOf(line.value()));
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
    if (auto base = text("base")) {
      auto name = app::CreateBaseNameOf(*base);
      options_.base_name_or_path = name.name;
      options_.revision = name.revision;
      if (auto refusal = compose::RefuseConfigAsBase(*base)) {
        Fail(*refusal);
        return;
      }
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

  bool set_index(const std::string& text) {
    auto index = merge::ParseModelIndex(text);
    if (!index.ok()) return Fail(index.error());
    index_ = std::move(index.value());
    return true;
  }
  std::string index_shards() const { return index_ ? nlohmann::json(index_->shard_names).dump() : "[]"; }
  bool add_shard(size_t n, const std::string& name, double file_size) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    auto header = HeaderFrom(*bytes, KnownSize(file_size));  // checked as the Merger checks a shard
    if (!header.ok()) return FailNamed(name, header.error());
    names_.push_back(name);
    headers_.push_back(std::make_unique<Header>(std::move(header.value())));
    return true;
  }
  bool base_complete() {
    if (!index_) return true;
    std::vector<merge::BaseShardHeader> shards;
    for (size_t i = 0; i < headers_.size(); ++i) shards.push_back({names_[i], headers_[i].get()});
    return Check(merge::CheckIndexAgainstShards(*index_, shards));
  }

  // Plans the adapter; `base_config`: the base's config.json text, or null.
  bool plan(const val& base_config) {
    std::optional<std::string> config;
    if (!base_config.isNull() && !base_config.isUndefined()) config = base_config.as<std::string>();
    std::vector<compose::CreateShard> shards;
    for (size_t i = 0; i < headers_.size(); ++i) shards.push_back({names_[i], headers_[i].get()});
    auto plan = compose::PlanCreate(shards, config, options_);
    if (!plan.ok()) return Fail(plan.error());
    plan_ = std::make_unique<compose::CreatePlan>(std::move(plan.value()));
    magnitudes_ = std::make_unique<compose::MagnitudePass>(*plan_);
    return true;
  }
  // {"ranges": [[shard name, begin, end], ...] (DoRA's base bytes, in the order supplyBase takes them),
  //  "baseBytes", "weightsName", "weightsSize", "configName", "config"}
  std::string plan_json() const {
    if (!plan_) return "";
    nlohmann::json ranges = nlohmann::json::array();
    for (const auto& r : magnitudes_->ranges()) ranges.push_back({names_[r.shard], r.begin, r.end});
    nlohmann::json j = {{"ranges", ranges},
                        {"baseBytes", magnitudes_->total_bytes()},
                        {"weightsName", std::string(compose::kCreateWeightsName)},
                        {"weightsSize", plan_->write.total_size()},
                        {"configName", std::string(compose::kCreateConfigName)},
                        {"config", plan_->config_text}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  bool supply_base(size_t n) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    if (!magnitudes_) return Fail(MakeError(ErrorCode::InvalidArgument, "base bytes before plan"));
    return Check(magnitudes_->Push(*bytes));
  }
  bool begin() {
    chunks_.Clear();
    if (!plan_) return Fail(MakeError(ErrorCode::InvalidArgument, "begin before plan"));
    if (!magnitudes_->done())
      return Fail(MakeError(ErrorCode::InvalidArgument, "begin before every DoRA weight was supplied"));
    emitter_ = std::make_unique<compose::AdapterEmitter>(*plan_, magnitudes_->TakeNorms(), chunks_);
    return Check(emitter_->Begin());
  }
  // The next tensor's bytes; done() tells when none is left.
  bool next() {
    chunks_.Clear();
    if (!emitter_) return Fail(MakeError(ErrorCode::InvalidArgument, "next before begin"));
    auto more = emitter_->Next();
    if (!more.ok()) return Fail(more.error());
    done_ = !more.value();
    return true;
  }
  bool done() const { return done_; }
  bool finish() {
    chunks_.Clear();
    if (!emitter_) return Fail(MakeError(ErrorCode::InvalidArgument, "finish before begin"));
    return Check(emitter_->Finish());
  }
  std::string summary(bool json, bool dry_run) const {
    if (!plan_) return "";
    return json ? app::RenderCreateJson(*plan_, dry_run) : app::RenderCreatePlanText(*plan_, dry_run);
  }
  std::string outcome_text() const { return plan_ ? app::RenderCreateOutcomeText(*plan_) : ""; }

 private:
  compose::CreateOptions options_;
  std::shared_ptr<const adapter::NamingTables> tables_;
  std::optional<merge::ModelIndex> index_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Header>> headers_;
  std::unique_ptr<compose::CreatePlan> plan_;
  std::unique_ptr<compose::MagnitudePass> magnitudes_;
  std::unique_ptr<compose::AdapterEmitter> emitter_;
  bool done_ = false;
};

}  // namespace

EMSCRIPTEN_BINDINGS(peft_bridge_create) {
  using emscripten::base;
  using emscripten::class_;
  class_<AdapterCreator, base<pb::wasm::HeaderReadingHandle>>("AdapterCreator")
      .constructor<std::string>()
      .function("ok", &AdapterCreator::ok)
      .function("setIndex", &AdapterCreator::set_index)
      .function("indexShards", &AdapterCreator::index_shards)
      .function("addShard", &AdapterCreator::add_shard)
      .function("baseComplete", &AdapterCreator::base_complete)
      .function("plan", &AdapterCreator::plan)
      .function("planJson", &AdapterCreator::plan_json)
      .function("supplyBase", &AdapterCreator::supply_base)
      .function("begin", &AdapterCreator::begin)
      .function("next", &AdapterCreator::next)
      .function("done", &AdapterCreator::done)
      .function("finish", &AdapterCreator::finish)
      .function("summary", &AdapterCreator::summary)
      .function("outcomeText", &AdapterCreator::outcome_text);
}

}  // namespace pb::wasm
