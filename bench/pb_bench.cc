// Native throughput benchmarks, all compared with a memcpy baseline measured in the same run
// (the machine is noisy: compare ratios, not absolute numbers across runs). See docs/benchmarks.md.
//
// Definitions (GB = 1e9 bytes):
//   memcpy:        copied_GB/s = bytes copied / s; traffic_GB/s = 2 x that (read + written).
//   kernels:       input = 128 MiB of the source dtype; output sized to match.
//                  traffic_GB/s = (bytes read + bytes written) / s;
//                  vs_memcpy = traffic_GB/s / memcpy traffic_GB/s (1.0 = at the memory bound).
//   reader:        file_GB/s = file bytes fed / s, 1 MiB chunks; vs_memcpy = file_GB/s / memcpy copied_GB/s
//                  (1.0 = as fast as copying the file once).
//   converter:     in_GB/s = source file bytes / s; traffic_GB/s = (source + converted output bytes) / s;
//                  vs_memcpy as for the kernels.
//   header:        the time to stream a 200,000-tensor header in 1 MiB chunks until the header event.
//
// The benchmarks run in registration order: memcpy first (its rate is kept in a static for the ratios),
// and memcpy again last, to show how much the machine drifted during the run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <span>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "convert/convert_stream.h"
#include "core/reader.h"
#include "core/writer.h"
#include "kernels/convert.h"
#include "kernels/convert_scalar.h"
#include "merge/model_index.h"

namespace pb::bench {  // synth.cc
uint8_t* AllocPages(size_t bytes);
void FreePages(uint8_t* p, size_t bytes);
std::vector<TensorSpec> MoeSpecs(size_t count);
std::vector<TensorSpec> LoraSpecs(size_t count, Dtype dtype, uint64_t elements);
std::string HeaderBytes(const std::vector<TensorSpec>& specs, TensorOrder order, uint64_t* file_size);
}  // namespace pb::bench

namespace {

using namespace pb;
using namespace pb::bench;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kBufBytes = 128 * kMiB;  // memcpy and kernel input size
constexpr size_t kChunk = 1 * kMiB;       // streaming chunk size
constexpr size_t kFileData = 256 * kMiB;  // data region of the synthetic files
constexpr size_t kFileTensors = 2048;     // 128 KiB each
constexpr size_t kHeaderTensors = 200'000;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// RAII page-aligned buffer.
struct Pages {
  explicit Pages(size_t n) : size(n), data(AllocPages(n)) {}
  ~Pages() { FreePages(data, size); }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  size_t size;
  uint8_t* data;
};

// ---------------------------------------------------------------------------------------------
// memcpy baseline

double g_memcpy_copied_Bps = 0;  // bytes copied per second, from BM_Memcpy (first run)

double TimeMemcpy(uint8_t* dst, const uint8_t* src, size_t n) {
  auto t0 = Clock::now();
  std::memcpy(dst, src, n);
  benchmark::ClobberMemory();
  return Seconds(t0, Clock::now());
}

// For runs filtered so that BM_Memcpy did not run: measure a baseline quietly.
double MemcpyCopiedBps() {
  if (g_memcpy_copied_Bps == 0) {
    Pages src(kBufBytes), dst(kBufBytes);
    TimeMemcpy(dst.data, src.data, kBufBytes);
    double s = 0;
    for (int i = 0; i < 10; ++i) s += TimeMemcpy(dst.data, src.data, kBufBytes);
    g_memcpy_copied_Bps = 10.0 * kBufBytes / s;
  }
  return g_memcpy_copied_Bps;
}
double MemcpyTrafficBps() { return 2 * MemcpyCopiedBps(); }

void BM_Memcpy(benchmark::State& state, bool is_baseline) {
  Pages src(kBufBytes), dst(kBufBytes);
  TimeMemcpy(dst.data, src.data, kBufBytes);  // warm-up
  double total = 0;
  for (auto _ : state) {
    double s = TimeMemcpy(dst.data, src.data, kBufBytes);
    state.SetIterationTime(s);
    total += s;
  }
  double rate = static_cast<double>(state.iterations()) * kBufBytes / total;
  if (is_baseline) g_memcpy_copied_Bps = rate;
  state.counters["copied_GB/s"] = rate / 1e9;
  state.counters["traffic_GB/s"] = 2 * rate / 1e9;
  if (!is_baseline && g_memcpy_copied_Bps > 0) state.counters["vs_first"] = rate / g_memcpy_copied_Bps;
}

// ---------------------------------------------------------------------------------------------
// Conversion kernels

uint64_t g_rng = 0x9E3779B97F4A7C15ull;
uint64_t Next() {  // xorshift64*
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 0x2545F4914F6CDD1Dull;
}
// Weight-like values: uniform mantissas over exponents 2^-12 .. 2^4, both signs.
float RandomWeight() {
  uint64_t r = Next();
  uint32_t exp = 127 - 12 + static_cast<uint32_t>((r >> 40) % 17);
  uint32_t bits = (static_cast<uint32_t>(r >> 63) << 31) | (exp << 23) | static_cast<uint32_t>(r & 0x7FFFFF);
  return std::bit_cast<float>(bits);
}

void FillF32(float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = RandomWeight();
}
void FillF64(double* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<double>(RandomWeight()) * (1 + 1e-9 * static_cast<double>(i % 1000));
}

enum class Src { BF16, F16, E4M3, E5M2 };
template <Src S, class T>
void FillNarrow(T* p, size_t n) {
  namespace sc = kernels::scalar;
  for (size_t i = 0; i < n; ++i) {
    uint32_t w = std::bit_cast<uint32_t>(RandomWeight());
    if constexpr (S == Src::BF16) p[i] = sc::F32BitsToBF16(w);
    else if constexpr (S == Src::F16) p[i] = sc::F32BitsToF16(w);
    else if constexpr (S == Src::E4M3) p[i] = sc::F32BitsToF8E4M3(w);
    else p[i] = sc::F32BitsToF8E5M2(w);
  }
}

// in_GB/s, traffic_GB/s (bytes read + written per second) and vs_memcpy (traffic over the memcpy
// traffic measured at the start of the run: 1.0 is the memory bound), from the timed seconds.
void SetTrafficCounters(benchmark::State& state, double seconds, uint64_t in_bytes, uint64_t out_bytes) {
  const double iters = static_cast<double>(state.iterations());
  const double traffic = iters * static_cast<double>(in_bytes + out_bytes) / seconds;
  state.counters["in_GB/s"] = iters * static_cast<double>(in_bytes) / seconds / 1e9;
  state.counters["traffic_GB/s"] = traffic / 1e9;
  state.counters["vs_memcpy"] = traffic / MemcpyTrafficBps();
}

template <class In, class Out>
void BM_Kernel(benchmark::State& state, void (*kernel)(const In*, Out*, size_t), void (*fill)(In*, size_t)) {
  const size_t n = kBufBytes / sizeof(In);
  Pages in(n * sizeof(In)), out(n * sizeof(Out));
  fill(reinterpret_cast<In*>(in.data), n);
  kernel(reinterpret_cast<const In*>(in.data), reinterpret_cast<Out*>(out.data), n);  // warm-up
  double total = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    kernel(reinterpret_cast<const In*>(in.data), reinterpret_cast<Out*>(out.data), n);
    benchmark::ClobberMemory();
    double s = Seconds(t0, Clock::now());
    state.SetIterationTime(s);
    total += s;
  }
  SetTrafficCounters(state, total, n * sizeof(In), n * sizeof(Out));
}

// The converter's access pattern without the converter: the same kernel called on 256 KiB output
// blocks that stay in the cache (StreamingConverter's staging size), with the input and the block
// optionally misaligned to a 64-byte line as a file's data region and a std::vector may be.
template <class In, class Out>
void BM_KernelBlocks(benchmark::State& state, void (*kernel)(const In*, Out*, size_t), void (*fill)(In*, size_t),
                     size_t in_misalign, size_t out_misalign) {
  constexpr size_t kBlockBytes = 256 * 1024;
  const size_t n = kBufBytes / sizeof(In);
  const size_t per_call = kBlockBytes / std::max(sizeof(In), sizeof(Out));
  Pages in(n * sizeof(In) + 4096), out(kBlockBytes + 4096);
  auto* src = reinterpret_cast<In*>(in.data + in_misalign);
  auto* dst = reinterpret_cast<Out*>(out.data + out_misalign);
  fill(src, n);
  double total = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    for (size_t i = 0; i < n; i += per_call) kernel(src + i, dst, std::min(per_call, n - i));
    benchmark::ClobberMemory();
    double s = Seconds(t0, Clock::now());
    state.SetIterationTime(s);
    total += s;
  }
  SetTrafficCounters(state, total, n * sizeof(In), n * sizeof(Out));
}

// ---------------------------------------------------------------------------------------------
// Synthetic files, StreamingReader, StreamingConverter

struct SynthFile {
  explicit SynthFile(Dtype dtype) {
    const uint64_t elements = kFileData / kFileTensors / (DtypeBits(dtype) / 8);
    uint64_t file_size = 0;
    std::string head = HeaderBytes(LoraSpecs(kFileTensors, dtype, elements), TensorOrder::kReference, &file_size);
    size = file_size;
    data_start = head.size();
    pages = std::make_unique<Pages>(size);
    std::memcpy(pages->data, head.data(), head.size());
    uint8_t* d = pages->data + data_start;
    const size_t data = size - data_start;
    if (dtype == Dtype::BF16) FillNarrow<Src::BF16>(reinterpret_cast<uint16_t*>(d), data / 2);
    else FillF32(reinterpret_cast<float*>(d), data / 4);
  }
  std::span<const uint8_t> bytes() const { return {pages->data, size}; }
  size_t size = 0, data_start = 0;
  std::unique_ptr<Pages> pages;
};

class CountEvents : public ReaderEvents {
 public:
  Status OnHeader(const Header&) override { return Status::Ok(); }
  Status OnTensorData(size_t, uint64_t, std::span<const uint8_t> b) override {
    bytes += b.size();
    ++spans;
    return Status::Ok();
  }
  uint64_t bytes = 0, spans = 0;
};

// copy_chunk: each 1 MiB chunk is first copied into a reused page-aligned staging buffer, as read(2) or
// a network stack would deliver it; otherwise the reader gets spans of the in-memory file directly.
void BM_Reader(benchmark::State& state, bool copy_chunk) {
  SynthFile file(Dtype::BF16);
  Pages staging(kChunk);
  auto src = file.bytes();
  double total = 0;
  uint64_t spans = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    CountEvents ev;
    StreamingReader reader(ReaderOptions{.total_size = src.size()});
    for (size_t off = 0; off < src.size(); off += kChunk) {
      auto chunk = src.subspan(off, std::min(kChunk, src.size() - off));
      if (copy_chunk) {
        std::memcpy(staging.data, chunk.data(), chunk.size());
        chunk = std::span<const uint8_t>(staging.data, chunk.size());
      }
      if (!reader.Feed(chunk, ev).ok()) state.SkipWithError("Feed failed");
    }
    if (!reader.Finish(ev).ok() || ev.bytes != src.size() - file.data_start) state.SkipWithError("Finish failed");
    benchmark::DoNotOptimize(ev.bytes);
    double s = Seconds(t0, Clock::now());
    state.SetIterationTime(s);
    total += s;
    spans = ev.spans;
  }
  const double rate = static_cast<double>(state.iterations()) * static_cast<double>(src.size()) / total;
  state.counters["file_GB/s"] = rate / 1e9;
  state.counters["vs_memcpy"] = rate / MemcpyCopiedBps();
  state.counters["spans"] = static_cast<double>(spans);
}

class DiscardSink : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> b) override {
    bytes += b.size();
    return Status::Ok();
  }
  uint64_t bytes = 0;
};

// Puts everything into one preallocated buffer: the bytes really reach memory. With `lend`, the
// converter writes into the buffer itself (ByteSink::Lend, as the CLI's file sink and the WASM sink
// do); without, it stages each block and the sink copies it.
class MemorySink : public ByteSink {
 public:
  MemorySink(uint8_t* dst, bool lend) : dst_(dst), lend_(lend) {}
  Status Write(std::span<const uint8_t> b) override {
    std::memcpy(dst_ + bytes, b.data(), b.size());
    bytes += b.size();
    return Status::Ok();
  }
  std::span<uint8_t> Lend(size_t max) override {
    if (!lend_) return {};
    return std::span<uint8_t>(dst_ + bytes, max);
  }
  Status Commit(size_t filled) override {
    bytes += filled;
    return Status::Ok();
  }
  uint64_t bytes = 0;

 private:
  uint8_t* dst_;
  bool lend_;
};

enum class SinkKind { kDiscard, kMemoryCopy, kMemoryLent };

void BM_Converter(benchmark::State& state, Dtype from, Dtype to, SinkKind kind) {
  const bool to_memory = kind != SinkKind::kDiscard;
  SynthFile file(from);
  auto src = file.bytes();
  const size_t out_capacity = src.size() * std::max<size_t>(1, DtypeBits(to) / DtypeBits(from)) + kMiB;
  std::unique_ptr<Pages> out;
  if (to_memory) out = std::make_unique<Pages>(out_capacity);
  double total = 0;
  uint64_t out_bytes = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    DiscardSink discard;
    std::unique_ptr<MemorySink> mem;
    ByteSink* sink = &discard;
    if (to_memory) sink = (mem = std::make_unique<MemorySink>(out->data, kind == SinkKind::kMemoryLent)).get();
    StreamingConverter conv(to, *sink, ReaderOptions{.total_size = src.size()});
    for (size_t off = 0; off < src.size(); off += kChunk)
      if (!conv.Feed(src.subspan(off, std::min(kChunk, src.size() - off))).ok()) state.SkipWithError("Feed failed");
    if (!conv.Finish().ok()) state.SkipWithError("Finish failed");
    benchmark::ClobberMemory();
    double s = Seconds(t0, Clock::now());
    state.SetIterationTime(s);
    total += s;
    out_bytes = to_memory ? mem->bytes : discard.bytes;
  }
  SetTrafficCounters(state, total, src.size(), out_bytes);
}

// ---------------------------------------------------------------------------------------------
// Header parsing: 200,000 MoE tensors, streamed in 1 MiB chunks until the header event.

class HeaderOnlyEvents : public ReaderEvents {
 public:
  Status OnHeader(const Header& h) override {
    tensors = h.tensor_count();
    return Status::Ok();
  }
  Status OnTensorData(size_t, uint64_t, std::span<const uint8_t>) override { return Status::Ok(); }
  size_t tensors = 0;
};

void BM_HeaderStream(benchmark::State& state) {
  uint64_t file_size = 0;
  const std::string head = HeaderBytes(MoeSpecs(kHeaderTensors), TensorOrder::kReference, &file_size);
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(head.data()), head.size());
  for (auto _ : state) {
    HeaderOnlyEvents ev;
    StreamingReader reader(ReaderOptions{.total_size = file_size});
    for (size_t off = 0; !reader.header_done(); off += kChunk) {
      if (off >= bytes.size() || !reader.Feed(bytes.subspan(off, std::min(kChunk, bytes.size() - off)), ev).ok()) {
        state.SkipWithError("header did not parse");
        break;
      }
    }
    if (ev.tensors != kHeaderTensors) state.SkipWithError("wrong tensor count");
  }
  state.counters["json_MB"] = static_cast<double>(head.size()) / 1e6;
  state.counters["json_MB/s"] =
      benchmark::Counter(static_cast<double>(head.size()) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
}

// The writer side of the same header (PlanWrite: sorting, JSON generation).
void BM_PlanWrite(benchmark::State& state) {
  const auto specs = MoeSpecs(kHeaderTensors);
  for (auto _ : state) {
    auto plan = PlanWrite(specs, Metadata{{"format", "pt"}}, TensorOrder::kReference);
    benchmark::DoNotOptimize(plan.ok());
  }
}

// model.safetensors.index.json of a large MoE checkpoint: 1,000,000 weight_map entries over 97 shards (~88 MB),
// read as a merge reads it (ParseJson's limits, then the weight_map checks). ordered_json took O(n^2).
std::string IndexJson(size_t entries) {
  std::string index = R"({"metadata": {"total_size": 1}, "weight_map": {)";
  for (size_t i = 0; i < entries; ++i)
    index += (i ? ",\n  \"" : "\n  \"") + std::string("model.layers.") + std::to_string(i / 1000) + ".mlp.experts." +
             std::to_string(i % 1000) + ".down_proj.weight\": \"model-" + std::to_string(i % 97) + ".safetensors\"";
  return index + "\n}}";
}

void BM_ParseIndex(benchmark::State& state) {
  const std::string index = IndexJson(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto parsed = merge::ParseModelIndex(index);
    if (!parsed.ok() || parsed->shard_names.size() != 97) state.SkipWithError("index did not parse");
  }
  state.counters["json_MB"] = static_cast<double>(index.size()) / 1e6;
  state.counters["json_MB/s"] =
      benchmark::Counter(static_cast<double>(index.size()) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("kernel_target", pb::kernels::KernelTargetName());
  benchmark::AddCustomContext("buffer_bytes", std::to_string(kBufBytes));
  using benchmark::RegisterBenchmark;
  auto timed = [](benchmark::internal::Benchmark* b) { b->UseManualTime()->Unit(benchmark::kMillisecond); };

  timed(RegisterBenchmark("memcpy/128MiB", BM_Memcpy, true));
  timed(RegisterBenchmark("kernel/BF16->F32", BM_Kernel<uint16_t, float>, kernels::BF16ToF32,
                          FillNarrow<Src::BF16, uint16_t>));
  timed(RegisterBenchmark("kernel/F32->BF16", BM_Kernel<float, uint16_t>, kernels::F32ToBF16, FillF32));
  timed(RegisterBenchmark("kernel/F16->F32", BM_Kernel<uint16_t, float>, kernels::F16ToF32,
                          FillNarrow<Src::F16, uint16_t>));
  timed(RegisterBenchmark("kernel/F32->F16", BM_Kernel<float, uint16_t>, kernels::F32ToF16, FillF32));
  timed(RegisterBenchmark("kernel/F8E4M3->F32", BM_Kernel<uint8_t, float>, kernels::F8E4M3ToF32,
                          FillNarrow<Src::E4M3, uint8_t>));
  timed(RegisterBenchmark("kernel/F32->F8E4M3", BM_Kernel<float, uint8_t>, kernels::F32ToF8E4M3, FillF32));
  timed(RegisterBenchmark("kernel/F8E5M2->F32", BM_Kernel<uint8_t, float>, kernels::F8E5M2ToF32,
                          FillNarrow<Src::E5M2, uint8_t>));
  timed(RegisterBenchmark("kernel/F32->F8E5M2", BM_Kernel<float, uint8_t>, kernels::F32ToF8E5M2, FillF32));
  timed(RegisterBenchmark("kernel/F64->F32", BM_Kernel<double, float>, kernels::F64ToF32, FillF64));
  timed(RegisterBenchmark("kernel/F32->F64", BM_Kernel<float, double>, kernels::F32ToF64, FillF32));
  timed(RegisterBenchmark("kernel_blocks/BF16->F32/aligned", BM_KernelBlocks<uint16_t, float>, kernels::BF16ToF32,
                          FillNarrow<Src::BF16, uint16_t>, 0, 0));
  timed(RegisterBenchmark("kernel_blocks/BF16->F32/in+8_out+16", BM_KernelBlocks<uint16_t, float>, kernels::BF16ToF32,
                          FillNarrow<Src::BF16, uint16_t>, 8, 16));
  timed(RegisterBenchmark("kernel_blocks/F32->BF16/aligned", BM_KernelBlocks<float, uint16_t>, kernels::F32ToBF16,
                          FillF32, 0, 0));
  timed(RegisterBenchmark("kernel_blocks/F32->BF16/in+8_out+16", BM_KernelBlocks<float, uint16_t>, kernels::F32ToBF16,
                          FillF32, 8, 16));
  timed(RegisterBenchmark("reader/256MiB/spans", BM_Reader, false));
  timed(RegisterBenchmark("reader/256MiB/copy_chunk", BM_Reader, true));
  timed(RegisterBenchmark("convert/BF16->F32/discard", BM_Converter, Dtype::BF16, Dtype::F32, SinkKind::kDiscard));
  timed(RegisterBenchmark("convert/F32->BF16/discard", BM_Converter, Dtype::F32, Dtype::BF16, SinkKind::kDiscard));
  timed(RegisterBenchmark("convert/BF16->F32/to_memory", BM_Converter, Dtype::BF16, Dtype::F32, SinkKind::kMemoryCopy));
  timed(RegisterBenchmark("convert/F32->BF16/to_memory", BM_Converter, Dtype::F32, Dtype::BF16, SinkKind::kMemoryCopy));
  timed(RegisterBenchmark("convert/BF16->F32/to_memory_lent", BM_Converter, Dtype::BF16, Dtype::F32,
                          SinkKind::kMemoryLent));
  timed(RegisterBenchmark("convert/F32->BF16/to_memory_lent", BM_Converter, Dtype::F32, Dtype::BF16,
                          SinkKind::kMemoryLent));
  RegisterBenchmark("header/200k_tensors/stream_1MiB", BM_HeaderStream)->Unit(benchmark::kMillisecond);
  RegisterBenchmark("header/200k_tensors/PlanWrite", BM_PlanWrite)->Unit(benchmark::kMillisecond);
  RegisterBenchmark("json/index/ParseModelIndex", BM_ParseIndex)
      ->Arg(100000)
      ->Arg(1000000)
      ->Unit(benchmark::kMillisecond);
  timed(RegisterBenchmark("memcpy/128MiB/again", BM_Memcpy, false));

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
