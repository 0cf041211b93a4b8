// Benchmark hooks for bench/merge_wasm_bench.mjs: the LoRA merge kernel, a mul+add peak loop and a
// memory.copy baseline, all timed inside WebAssembly so that no JS <-> heap copy is measured. Not part of the
// package's API (web/src does not use them); they only cost a few kilobytes of code.
//
//   benchMergeRows(rows, cols, rank, iterations, inPlace) -> {best, median, checksum}   seconds per merge of
//       a rows x cols BF16 weight into BF16 (PEFT's default path), W and W' in page-aligned heap buffers;
//       checksum: FNV-1a of the last output, comparable with the native build's for the same inputs.
//   benchMulAddPeak(iterations) -> GFLOP/s of independent f32x4 multiply-then-add chains (SIMD128 has no FMA;
//       this is the arithmetic of the merge's inner loop).
//   benchMemoryCopy(bytes, iterations) -> best seconds of one memcpy (memory.copy with -mbulk-memory) between
//       two page-aligned buffers.
// Inputs are generated here with a 32-bit xorshift from integer bits only (em++ 3.1.6 miscompiled a 64-bit
// generator at -O3 -msimd128), the same generator and constants as bench/merge_bench.cc.
#include <emscripten/bind.h>
#include <emscripten/emscripten.h>
#include <emscripten/val.h>
#include <wasm_simd128.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/convert_scalar.h"
#include "kernels/lowrank.h"

namespace {

namespace sc = pb::kernels::scalar;

double NowSeconds() { return emscripten_get_now() * 1e-3; }

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
  return sc::BitsFloat((r & 0x80000000u) | (e << 23) | (r & 0x7FFFFFu));
}

// Page-aligned heap buffer (aligned W and W' keep the two streams out of 4K aliasing).
struct Buffer {
  explicit Buffer(size_t n) : data(static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {}
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

emscripten::val BenchMergeRows(double rows_d, double cols_d, double rank_d, int iterations, bool in_place) {
  const size_t rows = static_cast<size_t>(rows_d), cols = static_cast<size_t>(cols_d),
               rank = static_cast<size_t>(rank_d);
  emscripten::val result = emscripten::val::object();
  Buffer w(rows * cols * 2), out(rows * cols * 2);
  if (!w.data || !out.data || iterations < 1) return result;
  // Same inputs as merge_bench.cc's MergeInputs (weights ~2^-7..2^-3, factors like trained LoRA).
  XorShift32 rng{12345};
  auto* wp = reinterpret_cast<uint16_t*>(w.data);
  for (size_t i = 0; i < rows * cols; ++i) wp[i] = sc::F32BitsToBF16(sc::FloatBits(RandomFloat(rng, 120, 124)));
  std::vector<float> left(rows * rank), right(rank * cols);
  for (float& x : left) x = RandomFloat(rng, 119, 123);
  for (float& x : right) x = RandomFloat(rng, 121, 125);
  const pb::kernels::LowRankFactors f{left.data(), right.data(), rank, 0.75f, 1.0f};
  uint8_t* dst = in_place ? w.data : out.data;
  std::vector<double> times;
  uint64_t checksum = 0;
  for (int it = 0; it <= iterations; ++it) {  // iteration 0 warms up (heap growth, pack buffer)
    const double t0 = NowSeconds();
    pb::kernels::MergeRows(pb::Dtype::BF16, w.data, pb::Dtype::BF16, dst, rows, cols, f);
    const double s = NowSeconds() - t0;
    if (it == 0) {
      // Checksum of the first (not in-place-repeated) merge: FNV-1a over the output bytes.
      uint64_t h = 0xCBF29CE484222325ull;
      for (size_t i = 0; i < rows * cols * 2; ++i) {
        h ^= dst[i];
        h *= 0x100000001B3ull;
      }
      checksum = h;
    } else {
      times.push_back(s);
    }
  }
  result.set("best", *std::min_element(times.begin(), times.end()));
  result.set("median", Median(times));
  // As a hex string: a u64 does not fit a JS number.
  char hex[17];
  for (int i = 0; i < 16; ++i) hex[i] = "0123456789abcdef"[(checksum >> (60 - 4 * i)) & 15];
  hex[16] = 0;
  result.set("checksum", std::string(hex));
  return result;
}

volatile float g_one = 1.0f;

double BenchMulAddPeak(int iterations) {
  // 6 chains x (x = x * m; s = s + x): 6 multiplies and 6 adds in flight cover the 3-cycle latencies at 2 per
  // cycle each, and the 13 live vectors fit V8's 16 xmm registers (8 chains spill: docs/kernels.md).
  // m = 1.0f from a volatile: values neither grow nor shrink and cannot be folded. Written out by
  // hand: as arrays, the chains can end up in linear memory (the shadow stack).
  constexpr int kChains = 6;
  constexpr int kInner = 1 << 20;
  const v128_t m = wasm_f32x4_splat(g_one);
  double best = 0;
  for (int it = 0; it < iterations; ++it) {
    v128_t x0 = wasm_f32x4_splat(1e-3f), x1 = wasm_f32x4_splat(2e-3f), x2 = wasm_f32x4_splat(3e-3f),
           x3 = wasm_f32x4_splat(4e-3f), x4 = wasm_f32x4_splat(5e-3f), x5 = wasm_f32x4_splat(6e-3f);
    v128_t s0 = wasm_f32x4_splat(0.0f), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0;
    const double t0 = NowSeconds();
    for (int i = 0; i < kInner; ++i) {
#define PB_CHAIN(c)               \
  x##c = wasm_f32x4_mul(x##c, m); \
  s##c = wasm_f32x4_add(s##c, x##c);
      PB_CHAIN(0) PB_CHAIN(1) PB_CHAIN(2) PB_CHAIN(3) PB_CHAIN(4) PB_CHAIN(5)
#undef PB_CHAIN
    }
    const double sec = NowSeconds() - t0;
    const v128_t total = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_add(s0, s1), wasm_f32x4_add(s2, s3)),
                                        wasm_f32x4_add(wasm_f32x4_add(s4, s5), wasm_f32x4_add(x0, x5)));
    if (wasm_f32x4_extract_lane(total, 0) == 42.0f) std::abort();  // keeps the loop alive
    best = std::max(best, 2.0 * 4 * kChains * static_cast<double>(kInner) / sec / 1e9);
  }
  return best;
}

// Published so that the optimizer must assume the timer call can read or write the buffers: otherwise it may
// drop a memcpy whose destination already holds the source's bytes.
uint8_t* volatile g_escape = nullptr;

double BenchMemoryCopy(double bytes_d, int iterations) {
  const size_t bytes = static_cast<size_t>(bytes_d);
  Buffer src(bytes), dst(bytes);
  if (!src.data || !dst.data) return 0;
  std::memset(src.data, 1, bytes);
  std::memset(dst.data, 2, bytes);
  g_escape = src.data;
  g_escape = dst.data;
  double best = 1e30;
  for (int it = 0; it < iterations; ++it) {
    src.data[it % bytes] = 1;  // a write between copies, so every copy has work to do
    const double t0 = NowSeconds();
    std::memcpy(dst.data, src.data, bytes);  // memory.copy (-mbulk-memory)
    best = std::min(best, NowSeconds() - t0);
  }
  if (dst.data[bytes / 2] != 1) std::abort();
  return best;
}

}  // namespace

EMSCRIPTEN_BINDINGS(peft_bridge_bench) {
  emscripten::function("benchMergeRows", &BenchMergeRows);
  emscripten::function("benchMulAddPeak", &BenchMulAddPeak);
  emscripten::function("benchMemoryCopy", &BenchMemoryCopy);
}
