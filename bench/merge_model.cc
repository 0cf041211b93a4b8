// The streaming merge engine alone over a whole generated model (bench/make_llama_model.cc): each shard is
// memory-mapped (the page cache, as the CLI's pread would see it after a first read) and pushed through
// merge::ShardMerger in 4 MiB chunks into a sink that discards the bytes, so disk and tmpfs write costs
// (about 1 GB/s on the benchmark VM) do not hide the engine's speed. Prints GB/s of base read and the peak RSS.
//
//   pb_merge_model MODEL_DIR [--threads N]   (threads: merge shards in parallel, one per thread)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "adapter/adapter_io.h"
#include "merge/merge_engine.h"
#include "merge/model_index.h"

namespace {

using namespace pb;

class NullSink : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> b) override {
    bytes += b.size();
    return Status::Ok();
  }
  uint64_t bytes = 0;
};

struct Mapped {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

Mapped Map(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) std::perror(path.c_str()), std::exit(1);
  struct stat st;
  ::fstat(fd, &st);
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) std::perror("mmap"), std::exit(1);
  return {static_cast<const uint8_t*>(p), static_cast<size_t>(st.st_size)};
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: pb_merge_model MODEL_DIR [--threads N]\n"), 2;
  const std::string dir = argv[1];
  int threads = argc >= 4 && std::string(argv[2]) == "--threads" ? std::atoi(argv[3]) : 1;
  auto index = merge::ParseModelIndex(Slurp(dir + "/model.safetensors.index.json"));
  if (!index.ok()) return std::fprintf(stderr, "%s\n", index.error().message.c_str()), 1;
  const std::vector<std::string>& names = index->shard_names;
  std::vector<Mapped> files;
  std::vector<Header> headers;
  for (const auto& n : names) {
    files.push_back(Map(dir + "/" + n));
    auto h = ParseWholeFile({files.back().data, files.back().size});
    if (!h.ok()) return std::fprintf(stderr, "%s\n", h.error().message.c_str()), 1;
    headers.push_back(std::move(h.value()));
  }
  std::string weights = Slurp(dir + "/adapter/adapter_model.safetensors");
  std::string config = Slurp(dir + "/config.json");
  adapter::AdapterSource src{"adapter_model.safetensors",
                             {reinterpret_cast<const uint8_t*>(weights.data()), weights.size()},
                             Slurp(dir + "/adapter/adapter_config.json"),
                             config};
  auto read = adapter::ReadAdapter(src, {});
  if (!read.ok()) return std::fprintf(stderr, "%s\n", read.error().message.c_str()), 1;
  std::string().swap(weights);  // as the CLI does: the Adapter holds its tensors, the file copy goes
  uint64_t adapter_bytes = 0;
  for (const auto& m : read->adapter.modules) adapter_bytes += m.a.bytes.size() + m.b.bytes.size();
  std::vector<merge::BaseShardHeader> shard_headers;
  for (size_t i = 0; i < names.size(); ++i) shard_headers.push_back({names[i], &headers[i]});
  merge::MergeOptions options;
  auto plan = merge::PlanMerge(shard_headers, read->adapter, config, options);
  if (!plan.ok()) return std::fprintf(stderr, "%s\n", plan.error().message.c_str()), 1;

  // Touch every page once so the timed run reads from memory, as a warm page cache would serve pread.
  uint64_t checksum = 0, in_bytes = 0;
  for (const auto& f : files)
    for (size_t i = 0; i < f.size; i += 4096) checksum += f.data[i];
  auto run_shard = [&](size_t s) {
    NullSink sink;
    merge::ShardMerger merger(plan->shards[s], options, sink);
    if (!merger.Begin().ok()) std::exit(1);
    const Header& h = headers[s];
    for (const auto& t : plan->shards[s].tensors) {
      if (!t.source) continue;
      TensorInfo info = h.tensor(*t.source);
      for (uint64_t pos = info.begin; pos < info.end;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(4 << 20, info.end - pos));
        Status st = merger.Push({files[s].data + h.data_start() + pos, n});
        if (!st.ok()) std::fprintf(stderr, "%s\n", st.error().message.c_str()), std::exit(1);
        pos += n;
      }
    }
    if (!merger.Finish().ok()) std::exit(1);
  };
  for (const auto& h : headers) in_bytes += h.data_size();
  // Mapped file pages count in RSS once touched, so the engine's own memory is the anonymous part: sample it
  // every few milliseconds and keep the peak.
  std::atomic<bool> done{false};
  std::atomic<long> peak_anon_kib{0};
  std::thread sampler([&] {
    while (!done) {
      std::ifstream status("/proc/self/status");
      std::string line;
      while (std::getline(status, line))
        if (line.rfind("RssAnon:", 0) == 0) peak_anon_kib = std::max(peak_anon_kib.load(), std::atol(line.c_str() + 8));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  auto t0 = std::chrono::steady_clock::now();
  if (threads <= 1) {
    for (size_t s = 0; s < names.size(); ++s) run_shard(s);
  } else {
    std::vector<std::thread> pool;
    for (size_t s = 0; s < names.size(); ++s) pool.emplace_back(run_shard, s);
    for (auto& t : pool) t.join();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  sampler.join();
  const long anon_kib = peak_anon_kib.load();
  std::printf("{\"bytes_in\": %llu, \"adapter_mib\": %.1f, \"seconds\": %.3f, \"gb_per_s\": %.2f, \"threads\": %d, "
              "\"peak_rss_anon_mib\": %.1f, "
              "\"modules\": %zu, \"checksum\": %llu}\n",
              static_cast<unsigned long long>(in_bytes), adapter_bytes / 1048576.0, seconds,
              static_cast<double>(in_bytes) / seconds / 1e9, threads, anon_kib / 1024.0, plan->modules_matched,
              static_cast<unsigned long long>(checksum % 1000));
  return 0;
}
