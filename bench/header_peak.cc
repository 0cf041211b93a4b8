// Time and peak memory of streaming a huge header: a synthetic 200,000-tensor MoE header (~20 MB of
// JSON, written by PlanWrite as the reference writer would) is fed to a StreamingReader in 1 MiB chunks
// until the header event (parsed and validated, coverage check included). The data region does not exist.
//
//   pb_header_peak [tensors=200000] [repeats=7]
//   pb_header_peak --file FILE [repeats=7]   an existing file instead: read into memory, then parsed whole
//                                            (ParseWholeFile) and streamed, for comparing with another
//                                            parser on the same bytes (docs/benchmarks.md, the Rust crate)
//
// Peak memory = VmHWM after the first parse - VmRSS before it. Linux keeps VmHWM as a process-lifetime
// high-water mark, so the input generation's own peak is first cleared by writing "5" to
// /proc/self/clear_refs (Linux >= 4.0). The input bytes themselves (the header, already in memory as a
// network or file buffer would be) are part of the baseline, not the delta.
// Targets: <= 0.2 s, <= 64 MiB. Exit status 0 even when missed (this is a measurement, not a test).
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/header.h"
#include "core/reader.h"
#include "core/writer.h"

namespace pb::bench {  // synth.cc
std::vector<TensorSpec> MoeSpecs(size_t count);
std::string HeaderBytes(const std::vector<TensorSpec>& specs, TensorOrder order, uint64_t* file_size);
}  // namespace pb::bench

namespace {

// A field of /proc/self/status in KiB (VmRSS, VmHWM), or -1.
long StatusKiB(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.compare(0, key.size(), key) == 0) return std::strtol(line.c_str() + key.size(), nullptr, 10);
  return -1;
}

bool ResetHighWaterMark() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

class Events : public pb::ReaderEvents {
 public:
  pb::Status OnHeader(const pb::Header& h) override {
    tensors = h.tensor_count();
    return pb::Status::Ok();
  }
  pb::Status OnTensorData(size_t, uint64_t, std::span<const uint8_t>) override { return pb::Status::Ok(); }
  size_t tensors = 0;
};

// Streams the header in 1 MiB chunks; returns seconds, or -1 on failure.
double StreamHeader(const std::string& head, uint64_t file_size, size_t expect_tensors) {
  constexpr size_t kChunk = size_t{1} << 20;
  auto t0 = std::chrono::steady_clock::now();
  Events ev;
  pb::StreamingReader reader(pb::ReaderOptions{.total_size = file_size});
  const auto* p = reinterpret_cast<const uint8_t*>(head.data());
  for (size_t off = 0; !reader.header_done(); off += kChunk) {
    if (off >= head.size()) return -1;
    pb::Status s = reader.Feed(std::span<const uint8_t>(p + off, std::min(kChunk, head.size() - off)), ev);
    if (!s.ok()) {
      std::fprintf(stderr, "parse failed: %s\n", s.error().message.c_str());
      return -1;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ev.tensors == expect_tensors ? secs : -1;
}

// Parses an existing file already in memory, whole and streamed; prints the same lines as the synthetic mode.
int CompareOnFile(const char* path, int repeats) {
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::fprintf(stderr, "cannot read %s\n", path), 1;
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const bool reset = ResetHighWaterMark();
  const long rss_before = StatusKiB("VmRSS");
  std::vector<double> whole;
  long hwm_after = 0;
  size_t tensors = 0;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto h = pb::ParseWholeFile(std::span<const uint8_t>(p, bytes.size()));
    if (!h.ok()) return std::fprintf(stderr, "parse failed: %s\n", h.error().message.c_str()), 1;
    tensors = h.value().tensor_count();
    whole.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (i == 0) hwm_after = StatusKiB("VmHWM");
  }
  std::vector<double> streamed;
  for (int i = 0; i < repeats; ++i) {
    double t = StreamHeader(bytes, bytes.size(), tensors);
    if (t < 0) return 1;
    streamed.push_back(t);
  }
  std::sort(whole.begin(), whole.end());
  std::sort(streamed.begin(), streamed.end());
  std::printf("parser             peft-bridge ParseWholeFile (whole file in memory)\n");
  std::printf("file               %s (%.1f MB, %zu tensors)\n", path, bytes.size() / 1e6, tensors);
  std::printf("time min/median/max  %.3f / %.3f / %.3f s  (%d runs)\n", whole.front(), whole[whole.size() / 2],
              whole.back(), repeats);
  std::printf("RSS before         %.1f MiB (the file's bytes included)\n", rss_before / 1024.0);
  std::printf("peak RSS delta     %.1f MiB  (VmHWM %.1f MiB after first parse; HWM reset %s)\n",
              (hwm_after - rss_before) / 1024.0, hwm_after / 1024.0, reset ? "ok" : "FAILED");
  std::printf("streamed, 1 MiB chunks, min/median  %.3f / %.3f s\n", streamed.front(), streamed[streamed.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--file") return CompareOnFile(argv[2], argc > 3 ? std::atoi(argv[3]) : 7);
  const size_t tensors = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 200'000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 7;

  uint64_t file_size = 0;
  std::string head;
  {
    auto specs = pb::bench::MoeSpecs(tensors);
    head = pb::bench::HeaderBytes(specs, pb::TensorOrder::kReference, &file_size);
  }
  malloc_trim(0);
  const bool reset = ResetHighWaterMark();
  const long rss_before = StatusKiB("VmRSS");

  const double first = StreamHeader(head, file_size, tensors);  // the measured peak comes from this run
  const long hwm_after = StatusKiB("VmHWM");
  if (first < 0) return 1;
  std::vector<double> times{first};
  for (int i = 1; i < repeats; ++i) {
    double t = StreamHeader(head, file_size, tensors);
    if (t < 0) return 1;
    times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const double peak_mib = (hwm_after - rss_before) / 1024.0;

  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("tensors            %zu\n", tensors);
  std::printf("header JSON bytes  %zu (%.1f MB)\n", head.size() - 8, (head.size() - 8) / 1e6);
  std::printf("described file     %.1f GB\n", file_size / 1e9);
  std::printf("chunk              1 MiB\n");
  std::printf("time first/min/median/max  %.3f / %.3f / %.3f / %.3f s  (%d runs)\n", first, times.front(), median,
              times.back(), repeats);
  std::printf("RSS before         %.1f MiB (input header buffer included)\n", rss_before / 1024.0);
  std::printf("peak RSS delta     %.1f MiB  (VmHWM %.1f MiB after first parse; HWM reset %s)\n", peak_mib,
              hwm_after / 1024.0, reset ? "ok" : "FAILED: delta includes input generation");
  std::printf("ru_maxrss          %.1f MiB (Linux derives it from the same high-water mark)\n", ru.ru_maxrss / 1024.0);
  std::printf("target time <= 0.2 s:   %s (median %.3f s)\n", median <= 0.2 ? "met" : "MISSED", median);
  std::printf("target peak <= 64 MiB:  %s (%.1f MiB)\n", peak_mib <= 64 ? "met" : "MISSED", peak_mib);
  return 0;
}
