// `merge` and `unmerge`: plan against every base shard's header, then stream each shard through the core
// merger with pread (regions of it on --threads threads, each written in place with pwrite; a local shard's
// unchanged tensors copied file to file by the kernel), writing every
// output (shards, index, config.json) to temporary files that are renamed into place only when all of them are
// complete.
#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

#include "text/python_json.h"
#include "app/base_extras.h"
#include "app/cli_text.h"
#include "merge/merge_report.h"
#include "app/output_policy.h"
#include "app/progress_text.h"
#include "cli/adapter_dir.h"
#include "cli/base_model.h"
#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/input_facts.h"
#include "cli/naming_table_files.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "app/merge_args.h"
#include "cli/text_output.h"
#include "merge/merge_engine.h"
#include "merge/model_index.h"
#include "merge/quantize_plan.h"
#include "net/remote_address.h"

namespace pb::cli {
namespace {

// The output of one region: its bytes at their place in the output file, with pwrite, through a small buffer;
// large writes (a read's worth of untouched bytes, a merged row block) go straight from the caller's span.
class RegionSink final : public ByteSink {
 public:
  static constexpr size_t kBuffer = 256 << 10;  // writes of <= 256 KiB avoid cold pages (docs/toolchain.md)
  RegionSink(const AtomicOutputFile& file, uint64_t offset) : file_(file), pos_(offset) {}
  Status Write(std::span<const uint8_t> bytes) override {
    if (bytes.size() >= kBuffer) {
      PB_RETURN_IF_ERROR(Flush());
      PB_RETURN_IF_ERROR(file_.WriteRegionAt(pos_, bytes));
      pos_ += bytes.size();
      return Status::Ok();
    }
    if (used_ + bytes.size() > kBuffer) PB_RETURN_IF_ERROR(Flush());
    if (buffer_.empty()) buffer_.resize(kBuffer);
    std::memcpy(buffer_.data() + used_, bytes.data(), bytes.size());
    used_ += bytes.size();
    return Status::Ok();
  }
  // Leaves `n` bytes for the caller to put in place itself (a forwarded run): the region's next bytes go after them.
  Status Skip(uint64_t n) {
    PB_RETURN_IF_ERROR(Flush());
    pos_ += n;
    return Status::Ok();
  }
  uint64_t position() const { return pos_ + used_; }
  Status Flush() {
    if (used_ == 0) return Status::Ok();
    PB_RETURN_IF_ERROR(file_.WriteRegionAt(pos_, std::span<const uint8_t>(buffer_.data(), used_)));
    pos_ += used_;
    used_ = 0;
    return Status::Ok();
  }

 private:
  const AtomicOutputFile& file_;
  uint64_t pos_;
  std::vector<uint8_t> buffer_;
  size_t used_ = 0;
};

// The progress line fed by every thread: the bytes moved add up atomically, and one thread at a time draws.
class SharedProgress {
 public:
  SharedProgress(StderrProgress& progress, uint64_t before) : progress_(progress), before_(before) {}
  void Add(uint64_t bytes) {
    moved_.fetch_add(bytes, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex_);
    progress_.Update(before_ + moved_.load(std::memory_order_relaxed));  // read under the lock: never goes back
  }
  uint64_t moved() const { return moved_.load(); }

 private:
  StderrProgress& progress_;
  const uint64_t before_;
  std::atomic<uint64_t> moved_{0};
  std::mutex mutex_;
};

struct ShardWork {
  ShardBytes& in;
  const Header& header;
  const merge::ShardPlan& plan;
  const AdapterDir& adapter;
  const merge::MergeOptions& options;
  AtomicOutputFile& out;
};

// A local shard's run of unchanged tensors, copied from the input file to its place in the output by the kernel
// (AtomicOutputFile::CopyRegionFrom), a piece at a time so that progress moves and a failed region stops it soon.
constexpr uint64_t kForwardPiece = 64 << 20;

// One region of a shard (merge/merge_regions.h) through its own merger. From a local file, the runs of tensors the
// merge leaves unchanged are forwarded (copied file to file inside the kernel: they never pass through memory
// here) and the others read, one read per run of adjacent ones; from a remote base, everything is read and pushed
// (the merger writes unchanged bytes straight from the read buffer), one read per run of adjacent tensors of
// either kind. The adapter's factors are supplied as the merger asks for them (before each merged tensor), read
// by range with pread. `stop` says the region's result is no longer wanted (an earlier region failed).
Status MergeRegion(const ShardWork& w, merge::TensorRange range, SharedProgress& progress,
                   const std::function<bool()>& stop, std::vector<merge::QuantError>& quant_errors) {
  RegionSink sink(w.out, w.plan.write.header.size() + merge::RegionOutputOf(w.plan, range).data_begin);
  merge::ShardMerger merger(w.plan, w.options, sink, range);
  PB_RETURN_IF_ERROR(merger.Begin());
  PB_RETURN_IF_ERROR(SupplyAdapterBytes(merger, w.adapter));
  const Status stopped = MakeError(ErrorCode::IoError, "stopped: an earlier region failed");
  auto push = [&](std::span<const uint8_t> bytes) -> Status {
    if (stop()) return stopped;
    PB_RETURN_IF_ERROR(merger.Push(bytes));
    PB_RETURN_IF_ERROR(SupplyAdapterBytes(merger, w.adapter));
    progress.Add(bytes.size());
    return Status::Ok();
  };
  const InputFile* file = w.in.local_file();
  auto forward = [&](const merge::SourceRun& r) -> Status {
    const uint64_t to = sink.position();
    PB_RETURN_IF_ERROR(sink.Skip(r.end - r.begin));  // before Forwarded, which may write what follows the run
    for (uint64_t at = r.begin; at < r.end;) {
      if (stop()) return stopped;
      const uint64_t n = std::min(kForwardPiece, r.end - at);
      PB_RETURN_IF_ERROR(w.out.CopyRegionFrom(*file, at, to + (at - r.begin), n));
      at += n;
      progress.Add(n);
    }
    PB_RETURN_IF_ERROR(merger.Forwarded(r.end - r.begin));
    return SupplyAdapterBytes(merger, w.adapter);
  };
  std::optional<merge::SourceRun> run;  // the data not yet read
  for (const merge::SourceRun& r : merge::SourceRuns(w.plan, w.header, w.options, range)) {
    if (file && r.forward) {
      if (run) PB_RETURN_IF_ERROR(w.in.Stream(run->begin, run->end, push));
      run.reset();
      PB_RETURN_IF_ERROR(forward(r));
      continue;
    }
    if (run && run->end == r.begin) {
      run->end = r.end;
      continue;
    }
    if (run) PB_RETURN_IF_ERROR(w.in.Stream(run->begin, run->end, push));
    run = r;
  }
  if (run) PB_RETURN_IF_ERROR(w.in.Stream(run->begin, run->end, push));
  PB_RETURN_IF_ERROR(SupplyAdapterBytes(merger, w.adapter));
  PB_RETURN_IF_ERROR(merger.Finish());
  PB_RETURN_IF_ERROR(sink.Flush());
  quant_errors = merger.quant_errors();
  return Status::Ok();
}

// A shard merged by up to `threads` threads: the header first, then its regions (a few per thread, of about
// equal cost; the largest are taken first), each written at its offset. The outcome is the single-threaded
// one: the error of the earliest failing region in file order (the regions after it stop early, those before
// it finish), and the quantization errors in file order.
Status MergeShard(const ShardWork& w, size_t threads, SharedProgress& shared,
                  std::vector<merge::QuantError>& quant_errors) {
  if (!w.in.ConcurrentStreams()) threads = 1;
  // The shard's input is open only while it is merged (a base may have thousands of shards).
  PB_RETURN_IF_ERROR(w.in.Acquire());
  struct Release {
    ShardBytes& in;
    ~Release() { in.Release(); }
  } release{w.in};
  const std::vector<merge::TensorRange> regions = merge::SplitIntoRegions(w.plan, threads == 1 ? 1 : threads * 4);
  const auto& header = w.plan.write.header;
  PB_RETURN_IF_ERROR(w.out.WriteRegionAt(0, {reinterpret_cast<const uint8_t*>(header.data()), header.size()}));
  std::vector<uint64_t> cost(regions.size(), 0);
  for (size_t r = 0; r < regions.size(); ++r)
    for (size_t i = regions[r].first; i < regions[r].last; ++i) cost[r] += merge::MergeCostOf(w.plan.tensors[i]);
  std::vector<size_t> order(regions.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });

  std::vector<std::optional<Error>> errors(regions.size());
  std::vector<std::vector<merge::QuantError>> quant(regions.size());
  std::atomic<size_t> next{0}, failed{SIZE_MAX};  // the earliest region (in file order) known to have failed
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < regions.size();) {
      const size_t r = order[k];
      if (failed.load() < r) continue;
      Status s = MergeRegion(
          w, regions[r], shared, [&] { return failed.load(std::memory_order_relaxed) < r; }, quant[r]);
      if (s.ok() || failed.load() < r) continue;
      errors[r] = s.error();
      for (size_t f = failed.load(); r < f && !failed.compare_exchange_weak(f, r);) {
      }
    }
  };
  threads = std::min(threads, regions.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t r = 0; r < regions.size(); ++r)
    if (errors[r]) return *errors[r];
  for (auto& q : quant) quant_errors.insert(quant_errors.end(), q.begin(), q.end());
  return Status::Ok();
}

// Whole shards merged at once, one per thread, the largest first: files are written in parallel where the
// writes of one file are not (docs/benchmarks.md, "Native CLI threads"). The outcome is the sequential one: the
// error of the first failing shard in file order, the quantization errors in shard order.
Status MergeShardsAtOnce(const std::vector<ShardWork>& works, size_t threads, SharedProgress& shared,
                         std::vector<merge::QuantError>& quant_errors) {
  std::vector<size_t> order(works.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return works[a].header.data_size() > works[b].header.data_size(); });
  std::vector<Status> results(works.size(), Status::Ok());
  std::vector<std::vector<merge::QuantError>> quant(works.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < works.size();) {
      // Each output file is open only while its shard is merged (parked when it was created).
      const ShardWork& w = works[order[k]];
      Status s = w.out.Resume();
      if (s.ok()) s = MergeShard(w, 1, shared, quant[order[k]]);
      if (s.ok()) s = w.out.Prepare();
      results[order[k]] = s;
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(threads, works.size()); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const Status& r : results)
    if (!r.ok()) return r;
  for (auto& q : quant) quant_errors.insert(quant_errors.end(), q.begin(), q.end());
  return Status::Ok();
}

// The cores this process may run on (its affinity mask), else what the hardware reports.
size_t AvailableCores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<size_t>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

uint64_t PeakRssBytes() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace

int RunMerge(const app::CommandLine& line) {
  const bool unmerge = line.command == "unmerge";
  // `convert IN OUT --quantize ...`: the same streaming pass over a model with no adapter.
  const bool convert = line.command == "convert";
  const char* command = convert ? "convert" : unmerge ? "unmerge" : "merge";
  const std::optional<std::string> base_path = convert ? line.positional[0] : line.Value("base"),
                                   adapter_path = line.Value("adapter"),
                                   out_dir = convert ? line.positional[1] : line.Value("out"),
                                   base_config = line.Value("base-config"), arch = line.Value("arch");
  auto parsed = app::MergeOptionsOf(line, unmerge);
  if (!parsed.ok()) return ReportFailure(parsed.error(), line.Has("json"));
  merge::MergeOptions options = std::move(parsed.value());
  const bool json = line.Has("json"), dry_run = line.Has("dry-run");

  app::OutputFlags flags;
  flags.force = line.Has("force");
  flags.follow_links = line.Has("follow-links");
  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  const auto t0 = std::chrono::steady_clock::now();

  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  options.tables = tables->get();
  auto base = OpenBase(*base_path, base_config);
  if (!base.ok()) return fail(ExplainInput(base.error(), *base_path, app::InputRole::kBase));
  std::optional<AdapterDir> adapter_dir;
  std::optional<adapter::ReadResult> read;
  if (convert) {
    adapter_dir.emplace();
    read.emplace();
  } else {
    auto loaded = LoadAdapterDir(*adapter_path, std::nullopt);
    if (!loaded.ok()) return fail(ExplainInput(loaded.error(), *adapter_path, app::InputRole::kAdapter));
    adapter_dir.emplace(std::move(loaded.value()));
    adapter::AdapterSource source = SourceOf(*adapter_dir);
    source.base_config = base->config;
    auto read_result = adapter::ReadAdapter(source, {std::nullopt, arch, false, tables->get()});
    if (!read_result.ok()) return fail(read_result.error());
    read.emplace(std::move(read_result.value()));
  }
  std::vector<merge::BaseShardHeader> shard_headers;
  for (size_t i = 0; i < base->headers.size(); ++i) shard_headers.push_back({base->shard_names[i], &base->headers[i]});
  auto plan = merge::PlanMerge(shard_headers, read->adapter, base->config, options);
  if (!plan.ok()) return fail(plan.error());

  uint64_t source_total = 0;
  for (const auto& h : base->headers) source_total += h.data_size();
  // --threads (checked by the grammar): regions of each shard merged at once; the bytes do not depend on it.
  // Without it, merge::DefaultMergeThreads: every core for a compute-bound merge, within a memory bound.
  const size_t threads = line.Has("threads") ? std::stoul(*line.Value("threads"))
                                             : merge::DefaultMergeThreads(plan.value(), AvailableCores());

  // The policy: no link out of an input directory, no silent loss, no output over an input or into a
  // non-empty directory.
  std::vector<app::InputFact> inputs = BaseFacts(base.value(), base_config);
  if (!convert) AddAdapterFacts("--adapter", *adapter_path, adapter_dir->weights_path, inputs);
  std::vector<std::string> names;  // what the merge writes itself
  for (const auto& shard : plan->shards) names.push_back(shard.name);
  if (base->index) names.push_back("model.safetensors.index.json");
  if (plan->config_json) names.push_back("config.json");
  // The base's other files (tokenizer, generation config...) are inputs too, and outputs.
  app::ExtraFilesRequest extra_request{
      *base_path, base->is_directory, {}, names, plan->config_json.has_value(), !line.Has("no-copy-extra")};
  if (extra_request.base_is_directory && extra_request.copy_extra) extra_request.listing = ListBase(base.value());
  const app::ExtraFiles extra = app::PlanExtraFiles(extra_request);
  if (!base->remote)
    for (const auto& name : extra.copy) inputs.push_back(FileFact("--base", Join(base->dir, name), base->dir));
  AddNamedInputFacts(line, inputs);
  if (Status s = app::CheckInputLinks(command, inputs, flags); !s.ok()) return fail(s.error());
  WriteText(stderr, merge::RenderMergeWarnings(plan.value()));  // what is not applied (planned), what is not quantized
  WriteText(stderr, extra.warnings);
  std::vector<merge::QuantError> quant_errors;
  auto summary_of = [&](double seconds, uint64_t peak_memory) {
    return merge::MergeSummary{&plan.value(), &read.value(), source_total, seconds,      peak_memory,
                               dry_run,       unmerge,       extra.copy,   quant_errors, convert};
  };
  if (!dry_run) {
    names.insert(names.end(), extra.copy.begin(), extra.copy.end());
    auto output = app::PlanOutput(command, inputs, DescribeOutputDirectory("--out", *out_dir, names), flags);
    if (!output.ok()) return fail(output.error());
    auto transaction = OutputTransaction::Begin(*out_dir, std::move(output.value()));
    if (!transaction.ok()) return fail(transaction.error());
    // The plan is told before the work starts; the outcome line follows it.
    if (!json && !line.Has("quiet")) {
      std::string plan_text = merge::RenderMergePlanText(summary_of(0, 0));
      WriteText(stdout, plan_text);
      std::fflush(stdout);
    }
    // Every output is written under a temporary name; any failure before Commit succeeds removes them all.
    StderrProgress progress(line, source_total);
    uint64_t done = 0;
    Status status = Status::Ok();
    for (size_t i = 0; i < extra.copy.size() && status.ok(); ++i) {
      auto out = transaction.value()->Add(extra.copy[i]);
      if (!out.ok()) {
        status = out.error();
        break;
      }
      status = CopyBaseFile(base.value(), extra.copy[i], *out.value());
      if (status.ok()) status = out.value()->Prepare();
    }
    // With threads and several local shards, the shards go at once (their files' writes run in parallel);
    // otherwise one after another, each by regions on the threads.
    bool at_once = threads > 1 && plan->shards.size() > 1;
    for (const auto& shard : base->shards) at_once = at_once && shard->ConcurrentStreams();
    std::vector<AtomicOutputFile*> outs;
    std::vector<ShardWork> works;
    for (size_t s = 0; s < plan->shards.size() && status.ok(); ++s) {
      auto out = transaction.value()->Add(plan->shards[s].name);
      if (!out.ok()) {
        status = out.error();
        break;
      }
      outs.push_back(out.value());
      works.push_back(
          {*base->shards[s], base->headers[s], plan->shards[s], adapter_dir.value(), options, *out.value()});
      if (at_once) {
        status = out.value()->Park();  // reopened when its shard is merged: not a descriptor per shard at once
        continue;
      }
      progress.StartFile(plan->shards[s].name, done);
      SharedProgress shared(progress, done);
      status = MergeShard(works.back(), threads, shared, quant_errors);
      done += shared.moved();
      if (status.ok()) status = out.value()->Prepare();
    }
    if (at_once && status.ok()) {
      progress.StartFile(app::FilesAtOnceLabel(works.size()), done);
      SharedProgress shared(progress, done);
      status = MergeShardsAtOnce(works, threads, shared, quant_errors);
      done += shared.moved();
      for (size_t s = 0; s < outs.size() && status.ok(); ++s) status = outs[s]->Prepare();
    }
    auto write_text = [&](const std::string& name, const std::string& text) {
      auto out = transaction.value()->Add(name);
      if (!out.ok()) return Status(out.error());
      return out.value()->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
    };
    if (status.ok() && base->index)
      status = write_text("model.safetensors.index.json", merge::OutputIndexJson(*base->index, plan.value()));
    if (status.ok() && plan->config_json) status = write_text("config.json", *plan->config_json);
    if (status.ok()) status = transaction.value()->Commit();
    if (!status.ok()) {
      progress.Abandon();
      return fail(status.error());
    }
    progress.Finish();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const merge::MergeSummary summary = summary_of(seconds, PeakRssBytes());
  // A dry run's plan is all it prints; a merge's plan was printed before the work.
  std::string out = json      ? merge::RenderMergeJson(summary)
                    : dry_run ? merge::RenderMergePlanText(summary)
                              : merge::RenderMergeOutcomeText(summary);
  if (json || !line.Has("quiet")) WriteText(stdout, out);
  return 0;
}

}  // namespace pb::cli
