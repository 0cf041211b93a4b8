// `merge` and `unmerge`: plan against every base shard's header, then stream each shard through the core
// merger with pread, writing every output (shards, index, config.json) to temporary files that are renamed
// into place only when all of them are complete.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "adapter/python_json.h"
#include "cli/adapter_dir.h"
#include "cli/commands.h"
#include "cli/file_io.h"
#include "app/cli_text.h"
#include "merge/merge_engine.h"
#include "merge/merge_report.h"
#include "merge/model_index.h"

namespace pb::cli {
namespace {

constexpr size_t kReadChunk = 4 << 20;

struct BaseModel {
  std::string dir;
  std::vector<std::string> shard_names;
  std::vector<InputFile> files;
  std::vector<Header> headers;
  std::optional<std::string> config;  // config.json beside the weights
  std::optional<merge::ModelIndex> index;  // model.safetensors.index.json
};

Result<BaseModel> OpenBase(const std::string& path, const std::optional<std::string>& config_path) {
  BaseModel base;
  std::vector<std::string> names;
  if (IsDirectory(path)) {
    base.dir = path;
    if (IsRegularFile(Join(path, "model.safetensors.index.json"))) {
      auto text = ReadText(Join(path, "model.safetensors.index.json"));
      if (!text.ok()) return text.error();
      auto index = merge::ParseModelIndex(text.value());
      if (!index.ok()) return index.error();
      names = index->shard_names;
      base.index = std::move(index.value());
    } else if (IsRegularFile(Join(path, "model.safetensors"))) {
      names.push_back("model.safetensors");
    } else {
      return MakeError(ErrorCode::IoError, "`" + path + "` has neither model.safetensors nor model.safetensors.index.json");
    }
    if (IsRegularFile(Join(path, "config.json"))) {
      auto text = ReadText(Join(path, "config.json"));
      if (!text.ok()) return text.error();
      base.config = std::move(text.value());
    }
  } else {
    size_t slash = path.rfind('/');
    base.dir = slash == std::string::npos ? "." : path.substr(0, slash);
    names.push_back(slash == std::string::npos ? path : path.substr(slash + 1));
    if (IsRegularFile(Join(base.dir, "config.json"))) {
      auto text = ReadText(Join(base.dir, "config.json"));
      if (!text.ok()) return text.error();
      base.config = std::move(text.value());
    }
  }
  if (config_path) {
    auto text = ReadText(*config_path);
    if (!text.ok()) return text.error();
    base.config = std::move(text.value());
  }
  for (const auto& name : names) {
    auto file = InputFile::Open(Join(base.dir, name));
    if (!file.ok()) return file.error();
    auto header = file->ReadHeader();
    if (!header.ok()) {
      Error e = header.error();
      e.message = name + ": " + e.message;
      return e;
    }
    base.files.push_back(std::move(file.value()));
    base.headers.push_back(std::move(header.value()));
  }
  base.shard_names = std::move(names);
  if (base.index) {  // every weight_map entry must be in the shard it names
    std::vector<merge::BaseShardHeader> shards;
    for (size_t i = 0; i < base.headers.size(); ++i) shards.push_back({base.shard_names[i], &base.headers[i]});
    if (Status s = merge::CheckIndexAgainstShards(*base.index, shards); !s.ok()) return s.error();
  }
  return base;
}

class Progress {
 public:
  Progress(uint64_t total, bool enabled) : total_(total), enabled_(enabled) {}
  void Update(uint64_t done) {
    if (!enabled_ || total_ == 0) return;
    int pct = static_cast<int>(100 * done / total_);
    if (pct == last_) return;
    last_ = pct;
    int filled = pct * 30 / 100;
    std::fprintf(stderr, "\r[%.*s%*s] %3d%%  %.1f / %.1f GB", filled, "##############################", 30 - filled, "",
                 pct, static_cast<double>(done) / 1e9, static_cast<double>(total_) / 1e9);
    std::fflush(stderr);
  }
  void Done() {
    if (enabled_ && last_ >= 0) std::fprintf(stderr, "\n");
  }

 private:
  uint64_t total_;
  bool enabled_;
  int last_ = -1;
};

Status MergeShard(const InputFile& in, const Header& header, const merge::ShardPlan& plan,
                  const merge::MergeOptions& options, ByteSink& sink, Progress& progress, uint64_t& done) {
  merge::ShardMerger merger(plan, options, sink);
  if (Status s = merger.Begin(); !s.ok()) return s;
  std::vector<uint8_t> buffer(kReadChunk);
  for (const auto& t : plan.tensors) {
    if (!t.source) continue;
    TensorInfo info = header.tensor(*t.source);
    uint64_t pos = header.data_start() + info.begin, end = header.data_start() + info.end;
    while (pos < end) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kReadChunk, end - pos));
      if (Status s = in.ReadAt(pos, std::span<uint8_t>(buffer.data(), n)); !s.ok()) return s;
      if (Status s = merger.Push(std::span<const uint8_t>(buffer.data(), n)); !s.ok()) return s;
      pos += n;
      done += n;
      progress.Update(done);
    }
  }
  return merger.Finish();
}

uint64_t PeakRssBytes() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::optional<Dtype> ParseDtype(const std::string& s) {
  if (s == "bf16") return Dtype::BF16;
  if (s == "f16") return Dtype::F16;
  if (s == "f32") return Dtype::F32;
  return std::nullopt;
}

}  // namespace

int RunMerge(const std::vector<std::string>& args, bool unmerge) {
  const char* command = unmerge ? "unmerge" : "merge";
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::string_view help = CliHelp(command);
      std::fwrite(help.data(), 1, help.size(), stdout);
      return 0;
    }
  std::optional<std::string> base_path, adapter_path, out_dir, base_config, arch;
  merge::MergeOptions options;
  options.unmerge = unmerge;
  bool json = false, dry_run = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") json = true;
    else if (a == "--safe") options.safe = true;
    else if (a == "--dry-run") dry_run = true;
    else if (a == "--base" || a == "--adapter" || a == "--out" || a == "--dtype" || a == "--base-config" || a == "--arch") {
      if (i + 1 >= args.size()) return UsageError(command, a + " needs a value");
      const std::string& v = args[++i];
      if (a == "--base") base_path = v;
      else if (a == "--adapter") adapter_path = v;
      else if (a == "--out") out_dir = v;
      else if (a == "--base-config") base_config = v;
      else if (a == "--arch") arch = v;
      else if (!(options.dtype = ParseDtype(v))) return UsageError(command, "unknown dtype `" + v + "` (expected bf16, f16 or f32)");
    } else {
      return UsageError(command, "unexpected argument `" + a + "`");
    }
  }
  if (!base_path || !adapter_path) return UsageError(command, "--base and --adapter are required");
  if (!out_dir && !dry_run) return UsageError(command, "--out is required (or --dry-run)");
  options.arch = arch;
  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  const auto t0 = std::chrono::steady_clock::now();

  auto base = OpenBase(*base_path, base_config);
  if (!base.ok()) return fail(base.error());
  auto adapter_dir = LoadAdapterDir(*adapter_path, std::nullopt);
  if (!adapter_dir.ok()) return fail(adapter_dir.error());
  adapter::AdapterSource source = SourceOf(adapter_dir.value());
  source.base_config = base->config;
  auto read = adapter::ReadAdapter(source, {std::nullopt, arch, false, nullptr});
  if (!read.ok()) return fail(read.error());
  std::vector<uint8_t>().swap(adapter_dir->weights);  // the Adapter holds its tensors; the file copy can go
  std::vector<merge::BaseShardHeader> shard_headers;
  for (size_t i = 0; i < base->headers.size(); ++i) shard_headers.push_back({base->shard_names[i], &base->headers[i]});
  auto plan = merge::PlanMerge(shard_headers, read->adapter, base->config, options);
  if (!plan.ok()) return fail(plan.error());

  uint64_t source_total = 0;
  for (const auto& h : base->headers) source_total += h.data_size();
  if (!dry_run) {
    if (base->files.front().IsSameFile(Join(*out_dir, base->shard_names.front())))
      return UsageError(command, "--out must not be the base model's directory");
    auto created = EnsureDirectory(*out_dir);
    if (!created.ok()) return fail(created.error());
    auto cleanup = [&](const Error& e) {
      // Temporary files are removed as their owners go out of scope, before the directory.
      return e;
    };
    std::vector<std::unique_ptr<AtomicOutputFile>> outputs;
    Progress progress(source_total, !json && ::isatty(2));
    uint64_t done = 0;
    Status status = Status::Ok();
    for (size_t s = 0; s < plan->shards.size() && status.ok(); ++s) {
      auto out = AtomicOutputFile::Create(Join(*out_dir, plan->shards[s].name));
      if (!out.ok()) { status = out.error(); break; }
      outputs.push_back(std::move(out.value()));
      status = MergeShard(base->files[s], base->headers[s], plan->shards[s], options, *outputs.back(), progress, done);
      if (status.ok()) status = outputs.back()->Prepare();
    }
    auto write_text = [&](const std::string& name, const std::string& text) {
      auto out = AtomicOutputFile::Create(Join(*out_dir, name));
      if (!out.ok()) return Status(out.error());
      outputs.push_back(std::move(out.value()));
      if (Status s = outputs.back()->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()}); !s.ok()) return s;
      return outputs.back()->Prepare();
    };
    if (status.ok() && base->index) status = write_text("model.safetensors.index.json", merge::OutputIndexJson(*base->index, plan.value()));
    if (status.ok() && plan->config_json) status = write_text("config.json", *plan->config_json);
    for (auto& o : outputs)
      if (status.ok()) status = o->Persist();
    progress.Done();
    if (!status.ok()) {
      Error e = cleanup(status.error());
      outputs.clear();
      if (created.value()) RemoveEmptyDirectory(*out_dir);
      return fail(e);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  merge::MergeSummary summary{&plan.value(), &read.value(), source_total, seconds, PeakRssBytes(), dry_run, unmerge};
  std::string out = json ? merge::RenderMergeJson(summary) : merge::RenderMergeText(summary);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace pb::cli
