// Embind layer over the streaming LoRA merge (src/merge): two handle classes that adapt the core to JS.
//
//  - Merger: the whole-model merge the CLI does. JS gives it the base's index (if any), each shard's header
//    bytes and the adapter's files; it plans (every mismatch reported before any output), then streams each
//    shard: begin(s) -> push(n)... -> finish(), the source bytes being the plan's ranges read in order.
//  - StreamMerger: one safetensors file as a byte stream in file order (merge::StreamingMerger), for the
//    TransformStream.
//
// Conventions are wasm/bindings.cc's: input through a handle-owned heap window (window(n), then a call taking
// n), output as a chunk table copied out by JS right after each call, failures as false + error_json(), and
// 64-bit sizes as double; the helpers for them are wasm/handle.h's.
#include <emscripten/bind.h>
#include <emscripten/heap.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/json.h"
#include "adapter/adapter_io.h"
#include "adapter/tensor_fetch.h"
#include "core/header.h"
#include "app/command_line.h"
#include "app/report.h"
#include "core/writer.h"
#include "merge/merge_engine.h"
#include "merge/quantize_plan.h"
#include "merge/merge_plan.h"
#include "merge/merge_regions.h"
#include "app/merge_args.h"
#include "merge/merge_report.h"
#include "app/option_tables.h"
#include "merge/model_index.h"
#include "failure_value.h"
#include "handle.h"
#include "header_reading_handle.h"
#include "naming_tables_option.h"

namespace pb::wasm {
namespace {

using emscripten::val;

// WASM memory only ever grows, so its current size is the high-water mark: what the merge needed at most.
double HeapSize() { return double(emscripten_get_heap_size()); }

// Options as JSON: the JS keys of merge's option table (app/option_tables.h: dtype, safe, allowPartial, arch,
// quantize, scheme, groupSize), read as the CLI's options; "unmerge": bool; "namingTables".
class MergeHandle : public HeaderReadingHandle {
 public:
  virtual ~MergeHandle() = default;
  explicit MergeHandle(const std::string& options_json) {
    auto parsed = ParseJson(options_json, "merge options");
    Json j = parsed.ok() ? std::move(parsed.value()) : Json();
    auto line = app::OptionsCommandLine("merge", j);  // the CLI's options, read as the CLI reads them
    if (!line.ok()) {
      Fail(line.error());
      return;
    }
    const bool unmerge = j.contains("unmerge") && j["unmerge"].is_boolean() && j["unmerge"].get<bool>();
    auto options = app::MergeOptionsOf(line.value(), unmerge);
    if (!options.ok()) {
      Fail(options.error());
      return;
    }
    options_ = std::move(options.value());
    auto tables = NamingTablesOption(j);
    if (!tables.ok()) {
      Fail(tables.error());
      return;
    }
    tables_ = std::move(tables.value());
    options_.tables = tables_.get();
  }
  bool ok() const { return !error_.has_value(); }

  // The adapter by range, never whole in the heap: after HeaderReadingHandle's header steps, load_adapter_ranges reads
  // the adapter from its header and the inline tensors (n window bytes), with its adapter_config.json and the base's
  // config.json (null, a string, or raw bytes; as the native CLI, the base config serves both the reader and the
  // planner); every other tensor is fetched while merging, as adapter_needs() asks.
  bool load_adapter_ranges(size_t n, const std::string& weights_name, const val& config, const val& base_config) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    if (!adapter_header_) return Fail(MakeError(ErrorCode::InvalidArgument, "the adapter's header was not given"));
    base_config_ = OptionalText(base_config);
    adapter::AdapterSource source{weights_name,          {},     OptionalText(config), base_config_,
                                  adapter_header_.get(), *bytes, adapter_gguf_.get()};
    auto read = adapter::ReadAdapter(source, {std::nullopt, options_.arch, false, tables_.get()});
    if (!read.ok()) return Fail(read.error());
    read_ = std::make_unique<adapter::ReadResult>(std::move(read.value()));
    return true;
  }
  // `convert --quantize`: the model's own weights, no adapter (an empty one: every tensor copied or converted,
  // the Linear weights quantized). The base config, as load_adapter_ranges takes it.
  bool set_no_adapter(const val& base_config) {
    base_config_ = OptionalText(base_config);
    read_ = std::make_unique<adapter::ReadResult>();
    convert_ = true;
    return true;
  }
  // The adapter ranges the merge needs before it can go on, as [[begin, end], ...] (empty when none); after
  // begin(), every push() / feed() and before finish(). supply_adapter(n) takes the next n of their bytes (in
  // order, concatenated) and may produce output.
  std::string adapter_needs() const {
    const adapter::AdapterBytesConsumer* c = Consumer();
    return c ? RangesJson(c->adapter_needs()) : "[]";
  }
  bool supply_adapter(size_t n) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    adapter::AdapterBytesConsumer* c = Consumer();
    if (!c) return Fail(MakeError(ErrorCode::InvalidArgument, "adapter bytes outside a merge"));
    return Check(c->SupplyAdapter(*bytes));
  }

 protected:
  virtual adapter::AdapterBytesConsumer* Consumer() const = 0;

  merge::MergeSummary SummaryOf(const merge::MergePlan& plan, double source_bytes, double seconds, bool dry_run) const {
    return {&plan,         read_.get(), uint64_t(source_bytes), seconds, peak_rss_, dry_run, options_.unmerge, copied_,
            quant_errors_, convert_,    uint64_t(HeapSize())};
  }
  std::string Summary(const merge::MergePlan& plan, double source_bytes, double seconds, bool dry_run,
                      bool json) const {
    merge::MergeSummary s = SummaryOf(plan, source_bytes, seconds, dry_run);
    return json ? merge::RenderMergeJson(s) : merge::RenderMergeText(s);
  }

  merge::MergeOptions options_;
  std::shared_ptr<const adapter::NamingTables> tables_;  // the namingTables option; null: the embedded ones
  std::vector<std::string> copied_;                      // the base's other files the CLI copies (set_copied_files)
  uint64_t peak_rss_ = 0;  // the process's peak RSS as its host measured it (set_peak_rss); 0: none
  std::vector<merge::QuantError> quant_errors_;  // --quantize: each finished weight's error, shard after shard
  bool convert_ = false;                         // set_no_adapter: the summary says convert
  std::optional<std::string> base_config_;
  std::unique_ptr<adapter::ReadResult> read_;
};

// ---- the whole-model merge ----

class Merger : public MergeHandle {
 public:
  using MergeHandle::MergeHandle;

  // model.safetensors.index.json: checks its weight_map and keeps its shard names (sorted, unique, as the CLI).
  bool set_index(const std::string& text) {
    auto index = merge::ParseModelIndex(text);
    if (!index.ok()) return Fail(index.error());
    index_ = std::move(index.value());
    return true;
  }
  // The shard names the index lists, as a JSON array.
  std::string index_shards() const { return index_ ? nlohmann::json(index_->shard_names).dump() : "[]"; }

  // A shard's header: n window bytes holding the 8-byte prefix and the header JSON (fewer when the source ended).
  bool add_shard(size_t n, const std::string& name, double file_size) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    auto header = HeaderFrom(*bytes, KnownSize(file_size));
    if (!header.ok()) return FailNamed(name, header.error());
    names_.push_back(name);
    headers_.push_back(std::make_unique<Header>(std::move(header.value())));
    return true;
  }
  // After the last shard: with an index, every weight_map entry must be in the shard it names (as the CLI).
  bool base_complete() {
    if (!index_) return true;
    return Check(merge::CheckIndexAgainstShards(*index_, Shards()));
  }

  bool plan() {
    if (!read_) return Fail(MakeError(ErrorCode::InvalidArgument, "plan before the adapter was loaded"));
    auto plan = merge::PlanMerge(Shards(), read_->adapter, base_config_, options_);
    if (!plan.ok()) return Fail(plan.error());
    plan_ = std::make_unique<merge::MergePlan>(std::move(plan.value()));
    return true;
  }
  // {"sourceBytes", "shards": [{"name", "outputSize", "sourceBytes", "runs": [[begin, end, forward], ...]}]}: per
  // output shard, the absolute source ranges to read in order (merge::SourceRuns): those marked forward hold
  // tensors the merge copies unchanged, which JS writes to the output itself (then forwarded(n)); the others go
  // through push(n). So only the tensors the adapter changes enter the heap.
  std::string plan_json() const {
    if (!plan_) return "";
    nlohmann::json shards = nlohmann::json::array();
    for (size_t s = 0; s < plan_->shards.size(); ++s) {
      nlohmann::json runs = nlohmann::json::array();
      uint64_t total = 0;
      for (const auto& r : merge::SourceRuns(plan_->shards[s], *headers_[s], options_)) {
        total += r.end - r.begin;
        runs.push_back({r.begin, r.end, r.forward});
      }
      shards.push_back({{"name", plan_->shards[s].name},
                        {"outputSize", plan_->shards[s].write.total_size()},
                        {"sourceBytes", total},
                        {"runs", runs}});
    }
    return nlohmann::json({{"sourceBytes", SourceTotal()}, {"shards", shards}}).dump();
  }

  bool begin(size_t shard) {
    chunks_.Clear();
    if (!plan_ || shard >= plan_->shards.size()) return Fail(MakeError(ErrorCode::InvalidArgument, "no such shard"));
    merger_ = std::make_unique<merge::ShardMerger>(plan_->shards[shard], options_, chunks_);
    shard_ = shard;
    return Check(merger_->Begin());
  }
  bool push(size_t n) {
    auto bytes = Begin(n);
    if (!merger_) return Fail(MakeError(ErrorCode::InvalidArgument, "push outside a shard"));
    return bytes && Check(merger_->Push(*bytes));
  }
  // The next n source bytes (of a run plan_json marks forward) were written to the output by JS itself, after
  // every chunk the merge produced so far. May produce output (what follows them, once complete).
  bool forwarded(double n) {
    chunks_.Clear();
    if (!merger_) return Fail(MakeError(ErrorCode::InvalidArgument, "forwarded outside a shard"));
    if (!(n >= 0)) return Fail(MakeError(ErrorCode::InvalidArgument, "forwarded: not a byte count"));
    return Check(merger_->Forwarded(uint64_t(n)));
  }
  bool finish() {
    chunks_.Clear();
    if (!merger_) return Fail(MakeError(ErrorCode::InvalidArgument, "finish outside a shard"));
    bool ok = Check(merger_->Finish());
    if (ok) SetShardQuantErrors(shard_, merger_->quant_errors());
    merger_.reset();
    return ok;
  }

  // Shards merged by other module instances (the npm CLI's shard workers): the --quantize errors of shard i as
  // that instance's quant_errors_json(i) gave them, so the summary lists every shard's, in shard order.
  std::string quant_errors_json(size_t shard) const {
    nlohmann::json out = nlohmann::json::array();
    if (shard < shard_quant_.size())
      for (const auto& q : shard_quant_[shard])
        out.push_back({{"tensor", q.tensor},
                       {"maxAbs", NumberJson(q.max_abs)},
                       {"sumSqErr", NumberJson(q.sum_sq_err)},
                       {"sumSqRef", NumberJson(q.sum_sq_ref)},
                       {"count", q.count}});
    return out.dump();
  }
  bool set_quant_errors(size_t shard, const std::string& text) {
    if (!plan_ || shard >= plan_->shards.size()) return Fail(MakeError(ErrorCode::InvalidArgument, "no such shard"));
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_array()) return Fail(MakeError(ErrorCode::InvalidArgument, "quantization errors: not a JSON array"));
    std::vector<merge::QuantError> errors;
    for (const auto& e : j) {
      auto field = [&](const char* key) { return e.is_object() && e.contains(key) ? e[key] : nlohmann::json(); };
      const nlohmann::json tensor = field("tensor"), count = field("count"), max_abs = field("maxAbs"),
                           sum_sq_err = field("sumSqErr"), sum_sq_ref = field("sumSqRef");
      const auto m = NumberFromJson(max_abs), e2 = NumberFromJson(sum_sq_err), r2 = NumberFromJson(sum_sq_ref);
      if (!tensor.is_string() || !count.is_number_unsigned() || !m || !e2 || !r2)
        return Fail(MakeError(ErrorCode::InvalidArgument, "quantization errors: malformed entry"));
      errors.push_back({tensor.get<std::string>(), *m, *e2, *r2, count.get<uint64_t>()});
    }
    SetShardQuantErrors(shard, errors);
    return true;
  }

  // The npm CLI's default --threads for the plan on `cores` cores (merge::DefaultWorkerThreads).
  double default_threads(double cores) const {
    if (!plan_) return 1;
    return double(merge::DefaultWorkerThreads(*plan_, cores >= 1 && cores < 1e6 ? size_t(cores) : 1));
  }

  // The output index (the CLI's OutputIndex): the input's, total_size recomputed, added tensors mapped to the
  // shard holding them; "" without an index.
  std::string output_index() const {
    if (!plan_ || !index_) return "";
    return merge::OutputIndexJson(*index_, *plan_);
  }
  // The output config.json text, or null when no base config was given.
  val config_json() const { return plan_ && plan_->config_json ? val(*plan_->config_json) : val::null(); }
  // The base's other files the CLI copies into the output (app/base_extras.h), a JSON array of names: the summary
  // lists them.
  // The process's peak RSS, measured by the host (Node: process.resourceUsage().maxRSS) before the summary: the
  // summary names it beside the module's heap.
  void set_peak_rss(double bytes) { peak_rss_ = bytes > 0 ? uint64_t(bytes) : 0; }
  void set_copied_files(const std::string& names_json) {
    copied_.clear();
    auto j = nlohmann::json::parse(names_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_array())
      for (const auto& n : j)
        if (n.is_string()) copied_.push_back(n.get<std::string>());
  }
  std::string summary(double seconds, bool dry_run, bool json) const {
    return plan_ ? Summary(*plan_, double(SourceTotal()), seconds, dry_run, json) : "";
  }
  // The text summary in its two parts, as the CLI prints them: the plan before the work, the outcome after.
  std::string plan_text(bool dry_run) const {
    return plan_ ? merge::RenderMergePlanText(SummaryOf(*plan_, double(SourceTotal()), 0, dry_run)) : "";
  }
  // The `warning:` lines the CLI prints once the plan is made (merge::RenderMergeWarnings).
  std::string plan_warnings() const { return plan_ ? merge::RenderMergeWarnings(*plan_) : ""; }
  std::string outcome_text(double seconds) const {
    return plan_ ? merge::RenderMergeOutcomeText(SummaryOf(*plan_, double(SourceTotal()), seconds, false)) : "";
  }

  // The planned tensors the adapter changes (every op but copy and convert), for a plan view such as the web
  // page's: [{"shard", "tensor", "op", "module" (null for modules_to_save copies), "dtype", "outDtype", "shape"}].
  std::string plan_tensors() const {
    nlohmann::json out = nlohmann::json::array();
    if (!plan_) return out.dump();
    for (const auto& shard : plan_->shards)
      for (const auto& t : shard.tensors) {
        if (t.op == merge::TensorOp::kCopy || t.op == merge::TensorOp::kConvert) continue;
        out.push_back({{"shard", shard.name},
                       {"tensor", t.name},
                       {"op", std::string(merge::TensorOpName(t.op))},
                       {"module", t.module ? nlohmann::json(t.module->path) : nlohmann::json(nullptr)},
                       {"dtype", std::string(DtypeName(t.in_dtype))},
                       {"outDtype", std::string(DtypeName(t.out_dtype))},
                       {"shape", t.shape}});
      }
    return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

 private:
  std::vector<merge::BaseShardHeader> Shards() const {
    std::vector<merge::BaseShardHeader> shards;
    for (size_t i = 0; i < headers_.size(); ++i) shards.push_back({names_[i], headers_[i].get()});
    return shards;
  }
  uint64_t SourceTotal() const {
    uint64_t total = 0;
    for (const auto& h : headers_) total += h->data_size();
    return total;
  }
  adapter::AdapterBytesConsumer* Consumer() const override { return merger_.get(); }
  // A double as JSON that keeps it exactly: a number (17 significant digits), or "NaN", "Infinity", "-Infinity".
  static nlohmann::json NumberJson(double x) {
    if (std::isfinite(x)) return x;
    return std::isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity";
  }
  static std::optional<double> NumberFromJson(const nlohmann::json& j) {
    if (j.is_number()) return j.get<double>();
    if (j == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (j == "Infinity") return std::numeric_limits<double>::infinity();
    if (j == "-Infinity") return -std::numeric_limits<double>::infinity();
    return std::nullopt;
  }
  // The summary lists the quantization errors shard after shard, whichever instance merged each and when.
  void SetShardQuantErrors(size_t shard, const std::vector<merge::QuantError>& errors) {
    if (shard_quant_.size() <= shard) shard_quant_.resize(shard + 1);
    shard_quant_[shard] = errors;
    quant_errors_.clear();
    for (const auto& s : shard_quant_) quant_errors_.insert(quant_errors_.end(), s.begin(), s.end());
  }

  std::optional<merge::ModelIndex> index_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Header>> headers_;  // stable addresses: the plan points into them
  std::unique_ptr<merge::MergePlan> plan_;
  std::unique_ptr<merge::ShardMerger> merger_;
  size_t shard_ = 0;                                         // the shard merger_ merges
  std::vector<std::vector<merge::QuantError>> shard_quant_;  // --quantize: each shard's errors, by shard index
};

// ---- one file, streamed in file order ----

class StreamMerger : public MergeHandle {
 public:
  using MergeHandle::MergeHandle;
  bool feed(size_t n) {
    auto bytes = Begin(n);
    if (!bytes || !Start()) return false;
    return Check(merger_->Feed(*bytes));
  }
  bool finish() {
    chunks_.Clear();
    if (!Start() || !Check(merger_->Finish())) return false;
    if (const auto* errors = merger_->quant_errors()) quant_errors_ = *errors;
    return true;
  }
  // {bytes, forward}: how many bytes from the stream's position make up the run it is in (Infinity while the
  // header's length is unknown), and whether JS may write them to the output itself (then forwarded(n)) instead
  // of feeding them (merge::StreamingMerger::NextRun).
  val next_run() {
    val r = val::object();
    merge::SourceRun run = read_ && Start() ? merger_->NextRun() : merge::SourceRun{0, UINT64_MAX, false};
    r.set("bytes", run.end == UINT64_MAX ? val::global("Infinity") : val(double(run.end - run.begin)));
    r.set("forward", run.forward);
    return r;
  }
  bool forwarded(double n) {
    chunks_.Clear();
    if (!merger_) return Fail(MakeError(ErrorCode::InvalidArgument, "forwarded before the header"));
    if (!(n >= 0)) return Fail(MakeError(ErrorCode::InvalidArgument, "forwarded: not a byte count"));
    return Check(merger_->Forwarded(uint64_t(n)));
  }
  bool planned() const { return merger_ && merger_->plan(); }
  std::string summary(double source_bytes, double seconds, bool json) const {
    return planned() ? Summary(*merger_->plan(), source_bytes, seconds, false, json) : "";
  }

 private:
  bool Start() {
    if (!read_) return Fail(MakeError(ErrorCode::InvalidArgument, "the adapter was not loaded"));
    if (!merger_) merger_ = std::make_unique<merge::StreamingMerger>(read_->adapter, base_config_, options_, chunks_);
    return true;
  }
  adapter::AdapterBytesConsumer* Consumer() const override { return merger_.get(); }
  std::unique_ptr<merge::StreamingMerger> merger_;
};

// ---- the index rules for callers that read headers themselves (inspectRepo) ----

// {ok: true, shards: "[names…]"} for a valid index (ParseModelIndex), else {ok: false, errorJson, errorText}.
val ModelIndexShards(const std::string& text) {
  auto index = merge::ParseModelIndex(text);
  if (!index.ok()) return FailureValue(index.error());
  val r = val::object();
  r.set("ok", true);
  r.set("shards", nlohmann::json(index->shard_names).dump());
  return r;
}

// CheckIndexEntries against each shard's tensor names, `held_json` = {"shard": ["tensor", …], …}.
val CheckIndexShards(const std::string& index_text, const std::string& held_json) {
  auto index = merge::ParseModelIndex(index_text);
  if (!index.ok()) return FailureValue(index.error());
  auto held = ParseJson(held_json, "shard tensor names");
  if (!held.ok() || !held->is_object())
    return FailureValue(MakeError(ErrorCode::InvalidArgument, "shard tensor names are not a JSON object"));
  std::unordered_map<std::string, std::unordered_set<std::string>> names;
  for (const auto& [shard, tensors] : held->items())
    for (const auto& t : tensors)
      if (t.is_string()) names[shard].insert(t.get<std::string>());
  Status s = merge::CheckIndexEntries(index.value(),
                                      [&](const std::string& shard, const std::string& tensor) -> std::optional<bool> {
                                        auto it = names.find(shard);
                                        if (it == names.end()) return std::nullopt;
                                        return it->second.contains(tensor);
                                      });
  if (!s.ok()) return FailureValue(s.error());
  val r = val::object();
  r.set("ok", true);
  return r;
}

}  // namespace
}  // namespace pb::wasm

EMSCRIPTEN_BINDINGS(peft_bridge_merge) {
  using namespace emscripten;
  using namespace pb::wasm;
  // Methods are registered on the class that declares them (Embind deduces the class from the member pointer).
  class_<HeaderReadingHandle, base<Handle>>("HeaderReadingHandle")
      .function("headerLength", &HeaderReadingHandle::header_length)
      .function("adapterHeaderLength", &HeaderReadingHandle::adapter_header_length)
      .function("setAdapterHeader", &HeaderReadingHandle::set_adapter_header)
      .function("adapterHeaderNeed", &HeaderReadingHandle::adapter_header_need)
      .function("adapterInlineRanges", &HeaderReadingHandle::adapter_inline_ranges);
  class_<MergeHandle, base<HeaderReadingHandle>>("MergeHandle")
      .function("ok", &MergeHandle::ok)
      .function("loadAdapterRanges", &MergeHandle::load_adapter_ranges)
      .function("setNoAdapter", &MergeHandle::set_no_adapter)
      .function("adapterNeeds", &MergeHandle::adapter_needs)
      .function("supplyAdapter", &MergeHandle::supply_adapter);
  class_<Merger, base<MergeHandle>>("Merger")
      .constructor<std::string>()
      .function("setIndex", &Merger::set_index)
      .function("indexShards", &Merger::index_shards)
      .function("addShard", &Merger::add_shard)
      .function("baseComplete", &Merger::base_complete)
      .function("plan", &Merger::plan)
      .function("planJson", &Merger::plan_json)
      .function("forwarded", &Merger::forwarded)
      .function("begin", &Merger::begin)
      .function("push", &Merger::push)
      .function("finish", &Merger::finish)
      .function("outputIndex", &Merger::output_index)
      .function("configJson", &Merger::config_json)
      .function("summary", &Merger::summary)
      .function("planText", &Merger::plan_text)
      .function("outcomeText", &Merger::outcome_text)
      .function("planWarnings", &Merger::plan_warnings)
      .function("setCopiedFiles", &Merger::set_copied_files)
      .function("setPeakRss", &Merger::set_peak_rss)
      .function("planTensors", &Merger::plan_tensors)
      .function("quantErrorsJson", &Merger::quant_errors_json)
      .function("setQuantErrors", &Merger::set_quant_errors)
      .function("defaultThreads", &Merger::default_threads);
  class_<StreamMerger, base<MergeHandle>>("StreamMerger")
      .constructor<std::string>()
      .function("feed", &StreamMerger::feed)
      .function("nextRun", &StreamMerger::next_run)
      .function("forwarded", &StreamMerger::forwarded)
      .function("finish", &StreamMerger::finish)
      .function("planned", &StreamMerger::planned)
      .function("summary", &StreamMerger::summary);
  function("heapSize", &HeapSize);
  function("modelIndexShards", &ModelIndexShards);
  function("checkIndexShards", &CheckIndexShards);
}
