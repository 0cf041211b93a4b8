// LoRA merge kernel benchmark (Google Benchmark): one 4096 x 4096 BF16 weight merged into BF16 at rank 8, 16
// and 64, on one thread and on two (rows split in halves, one std::thread each), against the physical floor
// measured in the same run (the machine is noisy: compare ratios, not absolute times across runs).
//
//   build/<dir>/bench/pb_merge_bench [--benchmark_filter=...]
//
// Baselines (registered first, kept in statics):
//   memcpy/256MiB/threads:T     page-aligned copy; copied_GB/s = bytes copied / s (traffic is twice that).
//   peak/mul+add/threads:T      separate fp32 multiply and add, the kernel's arithmetic (peak_flops.cc).
//   peak/fma/threads:T          fused multiply-add, what a BLAS would use (the merge may not: see lowrank.cc).
// Merges (W and W' separate page-aligned buffers, so no 4K aliasing between the two streams):
//   ms, best_ms   median and minimum time per merge (the whole matrix, including packing `right`).
//   GFLOP/s       2 * rows * cols * rank / time (median; best_GFLOP/s from best_ms).
//   floor_ms      max(bytes floor, flop floor): bytes floor = (read W + write W') / (2 x best memcpy copied
//                 rate with T threads), i.e. the merge moving its bytes as fast as memcpy moves bytes; flop
//                 floor = 2 * rows * cols * rank / best mul+add peak with T threads.
//   vs_floor      ms / floor_ms, best_vs_floor = best_ms / floor_ms (1.0 = at the floor).
//   floor_fma_ms  the same floor with the FMA peak; best_vs_floor_fma = best_ms / floor_fma_ms.
//   bytes_ms, flops_ms  the two parts of the floor.
// The merge variants: `oop` writes a separate W' (plain stores: non-temporal stores were tried and were slower,
// see lowrank.cc); `inplace` writes W' over W.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/convert.h"
#include "kernels/convert_scalar.h"
#include "kernels/lowrank.h"

namespace pb::bench {  // synth.cc, peak_flops.cc
uint8_t* AllocPages(size_t bytes);
void FreePages(uint8_t* p, size_t bytes);
double PeakMulAdd(uint64_t iters, float m, float* sink);
double PeakFma(uint64_t iters, float m, float* sink);
}  // namespace pb::bench

namespace {

using namespace pb;
using namespace pb::bench;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kRows = 4096, kCols = 4096;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Pages {
  explicit Pages(size_t n) : size(n), data(AllocPages(n)) {}
  ~Pages() { FreePages(data, size); }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  size_t size;
  uint8_t* data;
};

// Runs fn(t) on `threads` threads at once (t = 0 on the calling thread) and returns the wall time; with
// `each`, also every thread's own time.
template <class Fn>
double RunThreads(int threads, const Fn& fn, std::vector<double>* each = nullptr) {
  std::vector<std::thread> pool;
  std::vector<double> own(threads);
  auto timed = [&](int t) {
    const auto t0 = Clock::now();
    fn(t);
    own[t] = Seconds(t0, Clock::now());
  };
  const auto t0 = Clock::now();
  for (int t = 1; t < threads; ++t) pool.emplace_back([&timed, t] { timed(t); });
  timed(0);
  for (auto& th : pool) th.join();
  if (each) *each = own;
  return Seconds(t0, Clock::now());
}

// The machine is shared and noisy (other processes only ever make a run slower), so every figure is given
// as the median and as the best (minimum time / maximum rate) over the iterations; floors use the best
// baseline rates. With 2 threads the baseline rates are the sum of each thread's own rate.
struct Times {
  std::vector<double> s;
  double Median() const {
    std::vector<double> v = s;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }
  double Best() const { return s.empty() ? 0 : *std::min_element(s.begin(), s.end()); }
};

// ---- baselines, per thread count (index 1 or 2) ----
double g_memcpy_copied_Bps[3] = {};
double g_peak_muladd[3] = {};
double g_peak_fma[3] = {};

volatile float g_one = 1.0f;  // m for the peak loops: 1.0f the compiler cannot see
float g_sink = 0;

void BM_Memcpy(benchmark::State& state, int threads) {
  const size_t bytes = 256 * kMiB;
  Pages src(bytes), dst(bytes);
  const size_t part = bytes / threads;
  auto copy = [&](int t) { std::memcpy(dst.data + t * part, src.data + t * part, part); };
  RunThreads(threads, copy);  // warm-up
  Times times;
  double best_rate = 0;  // sum over threads of each thread's own rate: robust to one thread starting late
  std::vector<double> each;
  for (auto _ : state) {
    const double s = RunThreads(threads, copy, &each);
    benchmark::ClobberMemory();
    state.SetIterationTime(s);
    times.s.push_back(s);
    double rate = 0;
    for (double e : each) rate += static_cast<double>(part) / e;
    best_rate = std::max(best_rate, rate);
  }
  g_memcpy_copied_Bps[threads] = best_rate;
  state.counters["copied_GB/s"] = bytes / times.Median() / 1e9;
  state.counters["best_copied_GB/s"] = best_rate / 1e9;
}

void BM_Peak(benchmark::State& state, bool fma, int threads) {
  constexpr uint64_t kIters = 4'000'000;
  std::vector<double> flops(threads);
  std::vector<float> sinks(threads);
  auto run = [&](int t) { flops[t] = fma ? PeakFma(kIters, g_one, &sinks[t]) : PeakMulAdd(kIters, g_one, &sinks[t]); };
  RunThreads(threads, run);  // warm-up (and clock ramp)
  Times times;
  double per_run_flops = 0, best_rate = 0;
  std::vector<double> each;
  for (auto _ : state) {
    const double s = RunThreads(threads, run, &each);
    state.SetIterationTime(s);
    times.s.push_back(s);
    per_run_flops = 0;
    double rate = 0;  // sum of the threads' own rates (each core's peak, even if they did not overlap exactly)
    for (int t = 0; t < threads; ++t) {
      per_run_flops += flops[t];
      rate += flops[t] / each[t];
    }
    best_rate = std::max(best_rate, rate);
  }
  for (float x : sinks) g_sink += x;
  (fma ? g_peak_fma : g_peak_muladd)[threads] = best_rate;
  state.counters["GFLOP/s"] = per_run_flops / times.Median() / 1e9;
  state.counters["best_GFLOP/s"] = best_rate / 1e9;
}

// ---- the merge ----

struct XorShift32 {
  uint32_t s;
  uint32_t Next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
};
float RandomFloat(XorShift32& rng, uint32_t emin, uint32_t emax) {
  const uint32_t r = rng.Next();
  const uint32_t e = emin + rng.Next() % (emax - emin + 1);
  return kernels::scalar::BitsFloat((r & 0x80000000u) | (e << 23) | (r & 0x7FFFFFu));
}

struct MergeInputs {
  explicit MergeInputs(size_t rank)
      : w(kRows * kCols * 2), out(kRows * kCols * 2), left(kRows * rank), right(rank * kCols) {
    XorShift32 rng{12345};
    auto* wp = reinterpret_cast<uint16_t*>(w.data);
    for (size_t i = 0; i < kRows * kCols; ++i)
      wp[i] = kernels::scalar::F32BitsToBF16(kernels::scalar::FloatBits(RandomFloat(rng, 120, 124)));
    for (float& x : left) x = RandomFloat(rng, 119, 123);
    for (float& x : right) x = RandomFloat(rng, 121, 125);
  }
  Pages w, out;
  std::vector<float> left, right;
};

// FNV-1a of the BF16 output of one merge of fresh inputs, as benchMergeRows (wasm/bench_bindings.cc)
// reports it: equal hex strings mean the native and WASM kernels produced the same bits.
std::string Checksum(const MergeInputs& in, size_t rank, float scale) {
  std::vector<uint8_t> out(kRows * kCols * 2);
  kernels::LowRankFactors f{in.left.data(), in.right.data(), rank, scale, 1.0f};
  kernels::MergeRows(Dtype::BF16, in.w.data, Dtype::BF16, out.data(), kRows, kCols, f);
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint8_t b : out) {
    h ^= b;
    h *= 0x100000001B3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

void BM_Merge(benchmark::State& state, size_t rank, int threads, bool in_place) {
  MergeInputs in(rank);
  const float scale = 0.75f;  // as in benchMergeRows
  state.SetLabel("checksum=" + Checksum(in, rank, scale));
  auto merge = [&](int t) {
    const size_t rows = kRows / threads, row0 = static_cast<size_t>(t) * rows;
    kernels::LowRankFactors f{in.left.data() + row0 * rank, in.right.data(), rank, scale, 1.0f};
    const uint8_t* w = in.w.data + row0 * kCols * 2;
    uint8_t* out = (in_place ? in.w.data : in.out.data) + row0 * kCols * 2;
    if (!kernels::MergeRows(Dtype::BF16, w, Dtype::BF16, out, rows, kCols, f)) std::abort();
  };
  RunThreads(threads, merge);  // warm-up: page faults, pack buffers
  Times times;
  for (auto _ : state) {
    const double s = RunThreads(threads, merge);
    benchmark::ClobberMemory();
    state.SetIterationTime(s);
    times.s.push_back(s);
  }
  const double per = times.Median(), best = times.Best();
  const double flops = 2.0 * kRows * kCols * static_cast<double>(rank);
  const double bytes = 2.0 * kRows * kCols * 2;  // read W + write W'
  const double bytes_s = bytes / (2 * g_memcpy_copied_Bps[threads]);
  const double flops_s = flops / g_peak_muladd[threads];
  const double flops_fma_s = flops / g_peak_fma[threads];
  const double floor_s = std::max(bytes_s, flops_s);
  const double floor_fma_s = std::max(bytes_s, flops_fma_s);
  state.counters["ms"] = per * 1e3;
  state.counters["best_ms"] = best * 1e3;
  state.counters["GFLOP/s"] = flops / per / 1e9;
  state.counters["best_GFLOP/s"] = flops / best / 1e9;
  state.counters["floor_ms"] = floor_s * 1e3;
  state.counters["vs_floor"] = per / floor_s;
  state.counters["best_vs_floor"] = best / floor_s;
  state.counters["floor_fma_ms"] = floor_fma_s * 1e3;
  state.counters["best_vs_floor_fma"] = best / floor_fma_s;
  state.counters["bytes_ms"] = bytes_s * 1e3;
  state.counters["flops_ms"] = flops_s * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("kernel_target", pb::kernels::KernelTargetName());
  benchmark::AddCustomContext("shape", "4096x4096 BF16 -> BF16");
  using benchmark::RegisterBenchmark;
  auto timed = [](benchmark::internal::Benchmark* b) { b->UseManualTime()->Unit(benchmark::kMillisecond); };
  for (int threads : {1, 2}) {
    const std::string t = "/threads:" + std::to_string(threads);
    // Longer runs for the baselines: on a shared machine the best of more iterations is closer to the truth.
    timed(RegisterBenchmark(("memcpy/256MiB" + t).c_str(), BM_Memcpy, threads)->MinTime(2.0));
    timed(RegisterBenchmark(("peak/mul+add" + t).c_str(), BM_Peak, false, threads)->MinTime(2.0));
    timed(RegisterBenchmark(("peak/fma" + t).c_str(), BM_Peak, true, threads)->MinTime(2.0));
  }
  for (int threads : {1, 2}) {
    for (size_t rank : {8, 16, 64}) {
      const std::string name = "merge/bf16/4096x4096/r" + std::to_string(rank) + "/threads:" + std::to_string(threads);
      timed(RegisterBenchmark((name + "/oop").c_str(), BM_Merge, rank, threads, false));
      timed(RegisterBenchmark((name + "/inplace").c_str(), BM_Merge, rank, threads, true));
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::fprintf(stderr, "(sink %g)\n", static_cast<double>(g_sink));  // keeps the peak loops alive
  return 0;
}
