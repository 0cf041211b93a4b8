// `merge` and `unmerge`: plan against every base shard's header, then stream each shard through the core
// merger with pread, writing every output (shards, index, config.json) to temporary files that are renamed
// into place only when all of them are complete.
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "adapter/python_json.h"
#include "cli/adapter_dir.h"
#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/input_facts.h"
#include "cli/naming_table_files.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "app/base_extras.h"
#include "app/cli_text.h"
#include "app/output_policy.h"
#include "app/remote_address.h"
#include "merge/merge_engine.h"
#include "app/merge_report.h"
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
  PB_RETURN_IF_ERROR(app::CheckLocalBase(path));  // a remote base: not streamed yet
  BaseModel base;
  std::vector<std::string> names;
  if (IsDirectory(path)) {
    base.dir = path;
    if (IsRegularFile(Join(path, "model.safetensors.index.json"))) {
      PB_ASSIGN_OR_RETURN(auto text, ReadText(Join(path, "model.safetensors.index.json")));
      auto index = merge::ParseModelIndex(text);
      if (!index.ok()) return index.error();
      names = index->shard_names;
      base.index = std::move(index.value());
    } else if (IsRegularFile(Join(path, "model.safetensors"))) {
      names.push_back("model.safetensors");
    } else {
      return MakeError(ErrorCode::IoError, "`" + path + "` has neither model.safetensors nor model.safetensors.index.json");
    }
    if (IsRegularFile(Join(path, "config.json"))) {
      PB_ASSIGN_OR_RETURN(auto text, ReadText(Join(path, "config.json")));
      base.config = std::move(text);
    }
  } else {
    size_t slash = path.rfind('/');
    base.dir = slash == std::string::npos ? "." : path.substr(0, slash);
    names.push_back(slash == std::string::npos ? path : path.substr(slash + 1));
    if (IsRegularFile(Join(base.dir, "config.json"))) {
      PB_ASSIGN_OR_RETURN(auto text, ReadText(Join(base.dir, "config.json")));
      base.config = std::move(text);
    }
  }
  if (config_path) {
    PB_ASSIGN_OR_RETURN(auto text, ReadText(*config_path));
    base.config = std::move(text);
  }
  for (const auto& name : names) {
    PB_ASSIGN_OR_RETURN(auto file, InputFile::Open(Join(base.dir, name)));
    auto header = file.ReadHeader();
    if (!header.ok()) {
      Error e = header.error();
      e.message = name + ": " + e.message;
      return e;
    }
    base.files.push_back(std::move(file));
    base.headers.push_back(std::move(header.value()));
  }
  base.shard_names = std::move(names);
  if (base.index) {  // every weight_map entry must be in the shard it names
    std::vector<merge::BaseShardHeader> shards;
    for (size_t i = 0; i < base.headers.size(); ++i) shards.push_back({base.shard_names[i], &base.headers[i]});
    PB_RETURN_IF_ERROR(merge::CheckIndexAgainstShards(*base.index, shards));
  }
  return base;
}

// The adapter's factors are read with pread as the merger asks for them (before each merged tensor).
Status MergeShard(const InputFile& in, const Header& header, const merge::ShardPlan& plan, const AdapterDir& adapter,
                  const merge::MergeOptions& options, ByteSink& sink, StderrProgress& progress, uint64_t& done) {
  merge::ShardMerger merger(plan, options, sink);
  PB_RETURN_IF_ERROR(merger.Begin());
  PB_RETURN_IF_ERROR(SupplyAdapterBytes(merger, adapter));
  std::vector<uint8_t> buffer(kReadChunk);
  for (const auto& t : plan.tensors) {
    if (!t.source) continue;
    TensorInfo info = header.tensor(*t.source);
    uint64_t pos = header.data_start() + info.begin, end = header.data_start() + info.end;
    while (pos < end) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kReadChunk, end - pos));
      PB_RETURN_IF_ERROR(in.ReadAt(pos, std::span<uint8_t>(buffer.data(), n)));
      PB_RETURN_IF_ERROR(merger.Push(std::span<const uint8_t>(buffer.data(), n)));
      PB_RETURN_IF_ERROR(SupplyAdapterBytes(merger, adapter));
      pos += n;
      done += n;
      progress.Update(done);
    }
  }
  PB_RETURN_IF_ERROR(SupplyAdapterBytes(merger, adapter));
  return merger.Finish();
}

uint64_t PeakRssBytes() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

// The base model's inputs for the output policy: its directory (when one was named), every shard, the index and
// config.json found beside them, and --base-config.
std::vector<app::InputFact> BaseFacts(const std::string& path, const BaseModel& base,
                                      const std::optional<std::string>& config_path) {
  std::vector<app::InputFact> facts;
  const bool named_dir = IsDirectory(path);
  if (named_dir) facts.push_back(DirectoryFact("--base", path));
  for (const auto& name : base.shard_names)
    facts.push_back(named_dir ? FileFact("--base", Join(base.dir, name), base.dir) : FileFact("--base", path, std::nullopt));
  for (const char* name : {"model.safetensors.index.json", "config.json"})
    if ((named_dir || std::string(name) == "config.json") && IsRegularFile(Join(base.dir, name)))
      facts.push_back(FileFact("--base", Join(base.dir, name), base.dir));
  if (config_path) facts.push_back(FileFact("--base-config", *config_path, std::nullopt));
  return facts;
}

// The base directory's entries, kinds as links lead (a dangling link is kOther): for app::PlanExtraFiles.
std::vector<app::BaseEntry> ListBaseDirectory(const std::string& dir) {
  std::vector<app::BaseEntry> entries;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      app::EntryKind kind = app::EntryKind::kOther;
      if (::stat(Join(dir, name).c_str(), &st) == 0)
        kind = S_ISREG(st.st_mode) ? app::EntryKind::kFile : S_ISDIR(st.st_mode) ? app::EntryKind::kDirectory : app::EntryKind::kOther;
      entries.push_back({name, kind});
    }
    ::closedir(d);
  }
  return entries;
}

// One of the base's other files, copied into the transaction's temporary file for it.
Status CopyInto(const std::string& path, ByteSink& sink) {
  PB_ASSIGN_OR_RETURN(auto in, InputFile::Open(path));
  std::vector<uint8_t> buffer(static_cast<size_t>(std::min<uint64_t>(kReadChunk, in.size())));
  for (uint64_t pos = 0; pos < in.size();) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), in.size() - pos));
    PB_RETURN_IF_ERROR(in.ReadAt(pos, std::span<uint8_t>(buffer.data(), n)));
    PB_RETURN_IF_ERROR(sink.Write(std::span<const uint8_t>(buffer.data(), n)));
    pos += n;
  }
  return Status::Ok();
}

}  // namespace

int RunMerge(const app::CommandLine& line) {
  const bool unmerge = line.command == "unmerge";
  const char* command = unmerge ? "unmerge" : "merge";
  const std::optional<std::string> base_path = line.Value("base"), adapter_path = line.Value("adapter"),
                                   out_dir = line.Value("out"), base_config = line.Value("base-config"),
                                   arch = line.Value("arch");
  merge::MergeOptions options;
  options.unmerge = unmerge;
  if (auto dtype = line.Value("dtype")) options.dtype = app::ParseFloatDtypeName(*dtype);  // checked by the grammar
  options.safe = line.Has("safe");
  const bool json = line.Has("json"), dry_run = line.Has("dry-run"), allow_partial = line.Has("allow-partial");
  app::OutputFlags flags;
  flags.force = line.Has("force");
  flags.follow_links = line.Has("follow-links");
  options.arch = arch;
  auto fail = [&](const Error& e) { return ReportFailure(e, json); };
  const auto t0 = std::chrono::steady_clock::now();

  auto tables = LoadNamingTables(line);
  if (!tables.ok()) return fail(tables.error());
  options.tables = tables->get();
  auto base = OpenBase(*base_path, base_config);
  if (!base.ok()) return fail(ExplainInput(base.error(), *base_path, app::InputRole::kBase));
  auto adapter_dir = LoadAdapterDir(*adapter_path, std::nullopt);
  if (!adapter_dir.ok()) return fail(ExplainInput(adapter_dir.error(), *adapter_path, app::InputRole::kAdapter));
  adapter::AdapterSource source = SourceOf(adapter_dir.value());
  source.base_config = base->config;
  auto read = adapter::ReadAdapter(source, {std::nullopt, arch, false, tables->get()});
  if (!read.ok()) return fail(read.error());
  std::vector<merge::BaseShardHeader> shard_headers;
  for (size_t i = 0; i < base->headers.size(); ++i) shard_headers.push_back({base->shard_names[i], &base->headers[i]});
  auto plan = merge::PlanMerge(shard_headers, read->adapter, base->config, options);
  if (!plan.ok()) return fail(plan.error());

  uint64_t source_total = 0;
  for (const auto& h : base->headers) source_total += h.data_size();

  // The policy: no link out of an input directory, no silent loss, no output over an input or into a
  // non-empty directory.
  std::vector<app::InputFact> inputs = BaseFacts(*base_path, base.value(), base_config);
  AddAdapterFacts("--adapter", *adapter_path, adapter_dir->weights_path, inputs);
  std::vector<std::string> names;  // what the merge writes itself
  for (const auto& shard : plan->shards) names.push_back(shard.name);
  if (base->index) names.push_back("model.safetensors.index.json");
  if (plan->config_json) names.push_back("config.json");
  // The base's other files (tokenizer, generation config...) are inputs too, and outputs.
  app::ExtraFilesRequest extra_request{*base_path, IsDirectory(*base_path), {}, names, plan->config_json.has_value(),
                                       !line.Has("no-copy-extra")};
  if (extra_request.base_is_directory && extra_request.copy_extra) extra_request.listing = ListBaseDirectory(base->dir);
  const app::ExtraFiles extra = app::PlanExtraFiles(extra_request);
  for (const auto& name : extra.copy) inputs.push_back(FileFact("--base", Join(base->dir, name), base->dir));
  if (Status s = app::CheckInputLinks(command, inputs, flags); !s.ok()) return fail(s.error());
  std::vector<app::DroppedTensor> dropped;
  for (const auto& r : read->adapter.rejected) dropped.push_back({r.name, r.reason});
  auto warnings = app::CheckDropped(command, dropped, allow_partial);
  if (!warnings.ok()) return fail(warnings.error());
  std::fwrite(warnings->data(), 1, warnings->size(), stderr);
  std::fwrite(extra.warnings.data(), 1, extra.warnings.size(), stderr);
  auto summary_of = [&](double seconds, uint64_t peak_memory) {
    return merge::MergeSummary{&plan.value(), &read.value(), source_total, seconds, peak_memory, dry_run, unmerge, extra.copy};
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
      std::fwrite(plan_text.data(), 1, plan_text.size(), stdout);
      std::fflush(stdout);
    }
    // Every output is written under a temporary name; any failure before Commit succeeds removes them all.
    StderrProgress progress(line, source_total);
    uint64_t done = 0;
    Status status = Status::Ok();
    for (size_t i = 0; i < extra.copy.size() && status.ok(); ++i) {
      auto out = transaction.value()->Add(extra.copy[i]);
      if (!out.ok()) { status = out.error(); break; }
      status = CopyInto(Join(base->dir, extra.copy[i]), *out.value());
    }
    for (size_t s = 0; s < plan->shards.size() && status.ok(); ++s) {
      auto out = transaction.value()->Add(plan->shards[s].name);
      if (!out.ok()) { status = out.error(); break; }
      progress.StartFile(plan->shards[s].name, done);
      status = MergeShard(base->files[s], base->headers[s], plan->shards[s], adapter_dir.value(), options, *out.value(), progress, done);
      if (status.ok()) status = out.value()->Prepare();
    }
    auto write_text = [&](const std::string& name, const std::string& text) {
      auto out = transaction.value()->Add(name);
      if (!out.ok()) return Status(out.error());
      return out.value()->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
    };
    if (status.ok() && base->index) status = write_text("model.safetensors.index.json", merge::OutputIndexJson(*base->index, plan.value()));
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
  std::string out = json ? merge::RenderMergeJson(summary)
                    : dry_run ? merge::RenderMergePlanText(summary) : merge::RenderMergeOutcomeText(summary);
  if (json || !line.Has("quiet")) std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace pb::cli
