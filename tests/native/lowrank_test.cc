// Tests for the low-rank merge kernels (src/kernels/lowrank.h).
//
// The oracle is a scalar reference that performs exactly the operations the header defines, in the same
// order (acc = 0; acc = acc + left*right for k ascending; t = acc * scale; y = float(w) + sign * t; round
// once), with the conversions of convert_scalar.h, so every result must match bit for bit: every dtype pair,
// odd shapes, sign -1, a scale that is not a power of two, NaN/Inf/subnormal weights, in-place and unaligned
// buffers. Natively this runs on every Highway target compiled in and supported by the CPU; under WASM on
// SIMD128. A digest over fixed inputs, recorded natively, must be reproduced by the WASM build. A float64
// check shows that the fp32 merge rounds like the exact merge to within one bf16 ulp.
//
// Test data comes from a 32-bit xorshift and is built from integer bit patterns only (em++ 3.1.6 at
// -O3 -msimd128 miscompiled a 64-bit generator; see docs/toolchain.md).

#include <gtest/gtest.h>

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

#ifndef PB_STATIC_DISPATCH
#include "hwy/targets.h"
#endif

namespace {

using pb::Dtype;
namespace k = pb::kernels;
namespace ref = pb::kernels::scalar;

struct XorShift32 {
  uint32_t s;
  uint32_t Next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
};

// Random sign, biased exponent in [emin, emax], random mantissa.
float RandomFloat(XorShift32& rng, uint32_t emin, uint32_t emax) {
  const uint32_t r = rng.Next();
  const uint32_t e = emin + rng.Next() % (emax - emin + 1);
  return ref::BitsFloat((r & 0x80000000u) | (e << 23) | (r & 0x7FFFFFu));
}

// ---- scalar reference ----

size_t Width(Dtype t) { return pb::DtypeBits(t) / 8; }

// Rounded product in its own statement through a volatile, so that no compiler can contract it with the
// following add (the kernels must not either).
float Product(float a, float b) {
  volatile float p = a * b;
  return p;
}

float WidenRef(Dtype t, const void* p, size_t i) {
  switch (t) {
    case Dtype::F32: return ref::BitsFloat(ref::LoadAt<uint32_t>(p, i));
    case Dtype::BF16: return ref::BitsFloat(ref::BF16ToF32Bits(ref::LoadAt<uint16_t>(p, i)));
    case Dtype::F16: return ref::BitsFloat(ref::F16ToF32Bits(ref::LoadAt<uint16_t>(p, i)));
    case Dtype::F64: return ref::BitsFloat(ref::F64BitsToF32Bits(ref::LoadAt<uint64_t>(p, i)));
    case Dtype::F8_E4M3: return ref::BitsFloat(ref::F8E4M3ToF32Bits(ref::LoadAt<uint8_t>(p, i)));
    case Dtype::F8_E5M2: return ref::BitsFloat(ref::F8E5M2ToF32Bits(ref::LoadAt<uint8_t>(p, i)));
    default: ADD_FAILURE() << "dtype"; return 0;
  }
}

void NarrowRef(Dtype t, void* p, size_t i, float f) {
  const uint32_t b = ref::FloatBits(f);
  switch (t) {
    case Dtype::F32: ref::StoreAt<uint32_t>(p, i, b); break;
    case Dtype::BF16: ref::StoreAt<uint16_t>(p, i, ref::F32BitsToBF16(b)); break;
    case Dtype::F16: ref::StoreAt<uint16_t>(p, i, ref::F32BitsToF16(b)); break;
    case Dtype::F64: ref::StoreAt<uint64_t>(p, i, ref::F32BitsToF64Bits(b)); break;
    case Dtype::F8_E4M3: ref::StoreAt<uint8_t>(p, i, ref::F32BitsToF8E4M3(b)); break;
    case Dtype::F8_E5M2: ref::StoreAt<uint8_t>(p, i, ref::F32BitsToF8E5M2(b)); break;
    default: ADD_FAILURE() << "dtype";
  }
}

// round_t(x) widened back: what PEFT's `delta.to(weight dtype)` leaves of an fp32 value.
float RoundTripRef(Dtype t, float x) {
  uint64_t buf = 0;
  NarrowRef(t, &buf, 0, x);
  return WidenRef(t, &buf, 0);
}

struct Problem {
  size_t rows, cols, rank;
  float scale, sign;
  std::vector<float> left, right;
  std::vector<float> t;  // reference sign-less t = acc * scale per element
  k::LowRankFactors Factors() const { return {left.data(), right.data(), rank, scale, sign}; }
};

// Factors shaped like trained LoRA factors (B ~ 2^-8..2^-4, A ~ 2^-6..2^-2).
Problem MakeProblem(size_t rows, size_t cols, size_t rank, float scale, float sign, uint32_t seed) {
  Problem p{rows, cols, rank, scale, sign, {}, {}, {}};
  XorShift32 rng{seed};
  p.left.resize(rows * rank);
  p.right.resize(rank * cols);
  for (float& x : p.left) x = RandomFloat(rng, 127 - 8, 127 - 4);
  for (float& x : p.right) x = RandomFloat(rng, 127 - 6, 127 - 2);
  // A few exact zeros, negative zeros and subnormal-producing tiny values in the factors.
  for (size_t i = 0; i < p.left.size(); i += 7) p.left[i] = (i % 2) ? 0.0f : -0.0f;
  if (!p.right.empty()) p.right[p.right.size() / 2] = ref::BitsFloat(0x00000003u);
  p.t.resize(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      float acc = 0.0f;
      for (size_t q = 0; q < rank; ++q) acc = acc + Product(p.left[i * rank + q], p.right[q * cols + j]);
      p.t[i * cols + j] = Product(acc, scale);
    }
  }
  return p;
}

// Weight bytes of dtype `t`: weight-like values plus, with `specials`, NaNs (quiet, signalling, negative),
// infinities, zeros, subnormals and near-overflow values at fixed positions.
std::vector<uint8_t> MakeWeights(Dtype t, size_t n, uint32_t seed, bool specials) {
  std::vector<uint8_t> w(n * Width(t));
  XorShift32 rng{seed};
  for (size_t i = 0; i < n; ++i) {
    const float f = RandomFloat(rng, 127 - 7, 127 - 3);
    if (t == Dtype::F64) {
      // Extra mantissa bits below fp32 precision, so the widening to fp32 rounds.
      const uint64_t bits = ref::F32BitsToF64Bits(ref::FloatBits(f)) | (rng.Next() & 0x1FFFFFFFu);
      ref::StoreAt<uint64_t>(w.data(), i, bits);
    } else {
      NarrowRef(t, w.data(), i, f);
    }
  }
  if (specials) {
    static const uint32_t kSpecialF32[] = {
        0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FA00000u,  // NaNs (quiet, negative, signalling)
        0x7F800000u, 0xFF800000u, 0x00000000u, 0x80000000u,  // Inf, zeros
        0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu,  // subnormals, FLT_MAX
        0x477FEFFFu, 0x477FF000u, 0x43EFFFFFu, 0x3F808000u,  // f16 / e4m3 rounding edges, bf16 tie
    };
    size_t s = 0;
    for (size_t i = 3; i < n; i += 11, ++s) {
      const uint32_t b = kSpecialF32[s % (sizeof(kSpecialF32) / sizeof(kSpecialF32[0]))];
      switch (t) {
        case Dtype::BF16: ref::StoreAt<uint16_t>(w.data(), i, static_cast<uint16_t>(b >> 16)); break;  // keeps sNaNs
        case Dtype::F64: ref::StoreAt<uint64_t>(w.data(), i, ref::F32BitsToF64Bits(b)); break;
        default: NarrowRef(t, w.data(), i, ref::BitsFloat(b)); break;
      }
    }
  }
  return w;
}

// Expected out = round_out(float(w) + sign * t) (or the embedding rule).
std::vector<uint8_t> ExpectedMerge(const Problem& p, Dtype in, const void* w, Dtype out_dtype, bool delta_first) {
  std::vector<uint8_t> out(p.rows * p.cols * Width(out_dtype));
  for (size_t e = 0; e < p.rows * p.cols; ++e) {
    float d = Product(p.sign, p.t[e]);
    if (delta_first) d = RoundTripRef(in, d);
    const float y = WidenRef(in, w, e) + d;
    NarrowRef(out_dtype, out.data(), e, y);
  }
  return out;
}

// ---- targets ----

template <class Fn>
void ForEachTarget(const Fn& fn) {
#ifdef PB_STATIC_DISPATCH
  SCOPED_TRACE(std::string("target ") + k::KernelTargetName());
  fn();
#else
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    // The lowrank and convert dispatch tables follow the same chosen target; convert.h can name it.
    ASSERT_EQ(std::string(k::KernelTargetName()), hwy::TargetName(target));
    SCOPED_TRACE(std::string("target ") + hwy::TargetName(target));
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
#endif
}

std::string Hex(const uint8_t* p, size_t bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = bytes; i-- > 0;) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// Byte-exact comparison element by element; reports the first few differences.
void ExpectSameElements(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t width,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size() / width; ++i) {
    if (std::memcmp(&got[i * width], &want[i * width], width) != 0 && ++bad <= 5) {
      ADD_FAILURE() << what << ": element " << i << " got " << Hex(&got[i * width], width) << " want "
                    << Hex(&want[i * width], width);
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

const Dtype kAllFloat[] = {Dtype::F32, Dtype::BF16, Dtype::F16, Dtype::F64, Dtype::F8_E4M3, Dtype::F8_E5M2};

std::string Name(Dtype t) { return std::string(pb::DtypeName(t)); }

struct Shape {
  size_t rows, cols, rank;
};
// Rows below and above the packing threshold and not multiples of the 4-row block; columns not multiples
// of any vector length (and smaller than one vector); ranks 1..70; one shape with several packed column
// super-tiles (rank 64 x 2051 columns).
const Shape kShapes[] = {{1, 1, 1},     {3, 5, 2},     {4, 16, 3}, {7, 33, 16},    {9, 64, 64}, {13, 127, 70},
                         {16, 1000, 8}, {37, 301, 13}, {5, 17, 1}, {20, 2051, 64}, {2, 999, 5}, {11, 48, 32}};

// ---------------------------------------------------------------------------------------------

TEST(LowRank, PrintTargets) {
  std::string names;
#ifdef PB_STATIC_DISPATCH
  names = k::KernelTargetName();
#else
  for (int64_t target : hwy::SupportedAndGeneratedTargets())
    names += std::string(names.empty() ? "" : ",") + hwy::TargetName(target);
#endif
  std::printf("[ lowrank  ] targets exercised: %s\n", names.c_str());
  EXPECT_FALSE(names.empty());
}

TEST(LowRank, MergeRowsAllDtypesAllShapesBitExact) {
  for (const Shape& s : kShapes) {
    for (float sign : {1.0f, -1.0f}) {
      const Problem p = MakeProblem(s.rows, s.cols, s.rank, 1.7320508f, sign,
                                    static_cast<uint32_t>(s.rows * 7919 + s.cols * 31 + s.rank + (sign < 0)));
      const size_t n = s.rows * s.cols;
      for (Dtype in : kAllFloat) {
        // Cover every pair on the first few shapes, the main pairs on the big ones (time under WASM).
        const bool big = n * s.rank > 200000;
        const std::vector<uint8_t> w = MakeWeights(in, n, static_cast<uint32_t>(n + 17), true);
        for (Dtype out_dtype : kAllFloat) {
          if (big && !(in == Dtype::BF16 || out_dtype == Dtype::BF16)) continue;
          const std::vector<uint8_t> want = ExpectedMerge(p, in, w.data(), out_dtype, false);
          const std::string what = Name(in) + "->" + Name(out_dtype) + " " + std::to_string(s.rows) + "x" +
                                   std::to_string(s.cols) + " r" + std::to_string(s.rank) +
                                   (sign < 0 ? " unmerge" : "");
          ForEachTarget([&] {
            std::vector<uint8_t> got(want.size(), 0xAB);
            ASSERT_TRUE(k::MergeRows(in, w.data(), out_dtype, got.data(), s.rows, s.cols, p.Factors()));
            ExpectSameElements(got, want, Width(out_dtype), what);
          });
        }
      }
    }
  }
}

TEST(LowRank, MergeRowsRoundDeltaFirstBitExact) {
  for (const Shape& s : kShapes) {
    if (s.rows * s.cols * s.rank > 200000) continue;
    const Problem p = MakeProblem(s.rows, s.cols, s.rank, 0.37f, -1.0f, static_cast<uint32_t>(s.cols * 13 + s.rank));
    const size_t n = s.rows * s.cols;
    for (Dtype in : kAllFloat) {
      const std::vector<uint8_t> w = MakeWeights(in, n, static_cast<uint32_t>(n + 5), true);
      for (Dtype out_dtype : {in, Dtype::F32, Dtype::BF16}) {
        const std::vector<uint8_t> want = ExpectedMerge(p, in, w.data(), out_dtype, true);
        ForEachTarget([&] {
          std::vector<uint8_t> got(want.size(), 0xCD);
          ASSERT_TRUE(k::MergeRowsRoundDeltaFirst(in, w.data(), out_dtype, got.data(), s.rows, s.cols, p.Factors()));
          ExpectSameElements(got, want, Width(out_dtype), "delta-first " + Name(in) + "->" + Name(out_dtype));
        });
      }
    }
  }
}

TEST(LowRank, MergeRowsF32BitExact) {
  const Problem p = MakeProblem(21, 257, 24, 2.5f, 1.0f, 99);
  for (Dtype in : kAllFloat) {
    const std::vector<uint8_t> w = MakeWeights(in, 21 * 257, 3, true);
    const std::vector<uint8_t> want = ExpectedMerge(p, in, w.data(), Dtype::F32, false);
    ForEachTarget([&] {
      std::vector<uint8_t> got(want.size());
      ASSERT_TRUE(k::MergeRowsF32(in, w.data(), reinterpret_cast<float*>(got.data()), 21, 257, p.Factors()));
      ExpectSameElements(got, want, 4, "MergeRowsF32 " + Name(in));
    });
  }
}

// Random shapes against the scalar reference: rows 1..17 (below and above the packing threshold, partial
// register blocks), cols with odd tails (and a few wide enough for several packed column super-tiles), rank
// 1..80, every dtype pair through MergeRows and MergeRowsRoundDeltaFirst, MergeRowsF32, merge and unmerge.
TEST(LowRank, RandomShapesAllDtypePairsBitExact) {
  XorShift32 rng{0x5EED1234u};
  for (int trial = 0; trial < 28; ++trial) {
    const size_t rows = 1 + rng.Next() % 17;
    const size_t cols = trial % 7 == 6 ? 1000 + rng.Next() % 1700 : 1 + rng.Next() % 300;
    const size_t rank = 1 + rng.Next() % 80;
    const float sign = (rng.Next() & 1) ? 1.0f : -1.0f;
    const float scale = RandomFloat(rng, 125, 129);
    const Problem p = MakeProblem(rows, cols, rank, scale, sign, rng.Next());
    const size_t n = rows * cols;
    const std::string shape =
        std::to_string(rows) + "x" + std::to_string(cols) + " r" + std::to_string(rank) + (sign < 0 ? " unmerge" : "");
    for (Dtype in : kAllFloat) {
      const std::vector<uint8_t> w = MakeWeights(in, n, rng.Next(), true);
      for (Dtype out_dtype : kAllFloat) {
        const std::vector<uint8_t> want = ExpectedMerge(p, in, w.data(), out_dtype, false);
        const std::vector<uint8_t> want_df = ExpectedMerge(p, in, w.data(), out_dtype, true);
        const std::string what = Name(in) + "->" + Name(out_dtype) + " " + shape;
        ForEachTarget([&] {
          std::vector<uint8_t> got(want.size(), 0xAB);
          ASSERT_TRUE(k::MergeRows(in, w.data(), out_dtype, got.data(), rows, cols, p.Factors()));
          ExpectSameElements(got, want, Width(out_dtype), what);
          std::fill(got.begin(), got.end(), 0xCD);
          ASSERT_TRUE(k::MergeRowsRoundDeltaFirst(in, w.data(), out_dtype, got.data(), rows, cols, p.Factors()));
          ExpectSameElements(got, want_df, Width(out_dtype), "delta-first " + what);
          if (out_dtype == Dtype::F32) {
            std::fill(got.begin(), got.end(), 0xEF);
            ASSERT_TRUE(k::MergeRowsF32(in, w.data(), reinterpret_cast<float*>(got.data()), rows, cols, p.Factors()));
            ExpectSameElements(got, want, 4, "MergeRowsF32 " + what);
          }
        });
      }
    }
  }
}

// NaN and Inf in w come out as the reference says (and as NaN / Inf at all).
TEST(LowRank, NonFiniteWeightsPropagate) {
  const Problem p = MakeProblem(6, 40, 9, 0.75f, 1.0f, 7);
  std::vector<uint16_t> w(6 * 40, 0x3C00);  // bf16 1/128
  w[0] = 0x7FC0;                            // NaN
  w[5] = 0xFF81;                            // negative signalling NaN
  w[17] = 0x7F80;                           // +Inf
  w[39] = 0xFF80;                           // -Inf (a scalar-tail column on 16-lane targets)
  w[200] = 0x7F7F;                          // bf16 max: adding a small delta stays finite
  const std::vector<uint8_t> want_f32 = ExpectedMerge(p, Dtype::BF16, w.data(), Dtype::F32, false);
  ForEachTarget([&] {
    for (Dtype out_dtype : {Dtype::BF16, Dtype::F16, Dtype::F32}) {
      std::vector<uint8_t> got(6 * 40 * Width(out_dtype));
      ASSERT_TRUE(k::MergeRows(Dtype::BF16, w.data(), out_dtype, got.data(), 6, 40, p.Factors()));
      ExpectSameElements(got, ExpectedMerge(p, Dtype::BF16, w.data(), out_dtype, false), Width(out_dtype),
                         "non-finite -> " + Name(out_dtype));
      const float nan0 = WidenRef(out_dtype, got.data(), 0), nan5 = WidenRef(out_dtype, got.data(), 5);
      EXPECT_TRUE(std::isnan(nan0));
      EXPECT_TRUE(std::isnan(nan5));
      EXPECT_EQ(WidenRef(out_dtype, got.data(), 17), INFINITY);
      EXPECT_EQ(WidenRef(out_dtype, got.data(), 39), -INFINITY);
      EXPECT_FALSE(std::isnan(WidenRef(out_dtype, got.data(), 1)));
    }
  });
  // fp32 output: the NaN keeps its sign and payload (quieted), as an x86 or WASM add does.
  EXPECT_EQ(ref::LoadAt<uint32_t>(want_f32.data(), 5), 0xFFC10000u);
}

// out == w (same width), and buffers at odd element offsets.
TEST(LowRank, InPlaceAndUnaligned) {
  const size_t rows = 19, cols = 203, n = rows * cols;
  const Problem p = MakeProblem(rows, cols, 12, 1.25f, -1.0f, 4242);
  const std::pair<Dtype, Dtype> pairs[] = {{Dtype::BF16, Dtype::BF16},
                                           {Dtype::F32, Dtype::F32},
                                           {Dtype::F16, Dtype::BF16},
                                           {Dtype::F64, Dtype::F64},
                                           {Dtype::F8_E4M3, Dtype::F8_E4M3}};
  for (const auto& pair : pairs) {
    const Dtype in = pair.first, out_dtype = pair.second;  // (clang 14 cannot capture structured bindings)
    const std::vector<uint8_t> w = MakeWeights(in, n, 11, true);
    const std::vector<uint8_t> want = ExpectedMerge(p, in, w.data(), out_dtype, false);
    const std::vector<uint8_t> want_df = ExpectedMerge(p, in, w.data(), out_dtype, true);
    ForEachTarget([&] {
      std::vector<uint8_t> buf = w;
      ASSERT_TRUE(k::MergeRows(in, buf.data(), out_dtype, buf.data(), rows, cols, p.Factors()));
      ExpectSameElements(buf, want, Width(out_dtype), "in place " + Name(in));
      buf = w;
      ASSERT_TRUE(k::MergeRowsRoundDeltaFirst(in, buf.data(), out_dtype, buf.data(), rows, cols, p.Factors()));
      ExpectSameElements(buf, want_df, Width(out_dtype), "in place delta-first " + Name(in));
      // Input one byte off its natural alignment, output one element off.
      std::vector<uint8_t> shifted(w.size() + 1);
      std::memcpy(shifted.data() + 1, w.data(), w.size());
      std::vector<uint8_t> out((n + 1) * Width(out_dtype));
      ASSERT_TRUE(
          k::MergeRows(in, shifted.data() + 1, out_dtype, out.data() + Width(out_dtype), rows, cols, p.Factors()));
      out.erase(out.begin(), out.begin() + static_cast<ptrdiff_t>(Width(out_dtype)));
      ExpectSameElements(out, want, Width(out_dtype), "unaligned " + Name(in));
    });
  }
}

// A large block: many micro-panels, several packed super-tiles of `right` (rank 4 x 2048 columns fits one;
// this checks the row loop at scale, 1026 rows = 256 panels + 2 single rows).
TEST(LowRank, LargeBlock) {
  const size_t rows = 1026, cols = 2048, n = rows * cols;
  const Problem p = MakeProblem(rows, cols, 4, 0.5f * 1.7320508f, 1.0f, 5);
  const std::vector<uint8_t> w = MakeWeights(Dtype::BF16, n, 8, false);
  for (Dtype out_dtype : {Dtype::BF16, Dtype::F32}) {
    const std::vector<uint8_t> want = ExpectedMerge(p, Dtype::BF16, w.data(), out_dtype, false);
    ForEachTarget([&] {
      std::vector<uint8_t> got(want.size());
      ASSERT_TRUE(k::MergeRows(Dtype::BF16, w.data(), out_dtype, got.data(), rows, cols, p.Factors()));
      ExpectSameElements(got, want, Width(out_dtype), "large -> " + Name(out_dtype));
    });
  }
}

#ifndef __EMSCRIPTEN__
// Natively the pack and staging buffers are thread-local: merges on several threads at once (different
// shapes, so that the buffers' contents differ) must not disturb each other.
TEST(LowRank, ConcurrentMergesOnThreads) {
  struct Job {
    Problem p;
    Dtype in, out;
    std::vector<uint8_t> w, want, got;
  };
  std::vector<Job> jobs;
  for (int t = 0; t < 4; ++t) {
    const size_t rows = 40 + 8 * t, cols = 300 + 64 * t, rank = 8 + 20 * t;
    const Dtype in = t % 2 ? Dtype::F64 : Dtype::BF16;  // F64 also uses the staging buffers
    Job job{MakeProblem(rows, cols, rank, 0.8f, 1.0f, 100 + t), in, Dtype::BF16, {}, {}, {}};
    job.w = MakeWeights(in, rows * cols, 200 + t, false);
    job.want = ExpectedMerge(job.p, in, job.w.data(), job.out, false);
    jobs.push_back(std::move(job));
  }
  std::vector<std::thread> threads;
  for (Job& job : jobs) {
    threads.emplace_back([&job] {
      for (int rep = 0; rep < 20; ++rep) {
        job.got.assign(job.want.size(), 0);
        k::MergeRows(job.in, job.w.data(), job.out, job.got.data(), job.p.rows, job.p.cols, job.p.Factors());
        if (job.got != job.want) return;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const Job& job : jobs) ExpectSameElements(job.got, job.want, 2, "thread job r" + std::to_string(job.p.rank));
}
#endif

TEST(LowRank, UnsupportedDtypesAndEmpty) {
  const Problem p = MakeProblem(2, 3, 1, 1.0f, 1.0f, 1);
  uint32_t w[6] = {}, out[6] = {};
  EXPECT_FALSE(k::MergeRows(Dtype::I32, w, Dtype::F32, out, 2, 3, p.Factors()));
  EXPECT_FALSE(k::MergeRows(Dtype::F32, w, Dtype::F8_E8M0, out, 2, 3, p.Factors()));
  EXPECT_FALSE(k::MergeRowsRoundDeltaFirst(Dtype::U8, w, Dtype::F32, out, 2, 3, p.Factors()));
  EXPECT_TRUE(k::MergeRows(Dtype::F32, w, Dtype::F32, out, 0, 3, p.Factors()));
  EXPECT_TRUE(k::MergeRows(Dtype::F32, w, Dtype::F32, out, 2, 0, p.Factors()));
}

// The fp32 merge against the exact (float64) merge: bf16 results are the correctly rounded value or a
// neighbour. Weights are kept well away from cancellation (|w| >= 2^-7, |delta| <~ 2^-7 * rank / 16).
TEST(LowRank, Bf16WithinOneUlpOfFloat64Merge) {
  for (size_t rank : {16u, 64u}) {
    const size_t rows = 64, cols = 1000, n = rows * cols;
    Problem p = MakeProblem(rows, cols, rank, 2.0f / std::sqrt(static_cast<float>(rank)), 1.0f, 31337);
    const std::vector<uint8_t> w = MakeWeights(Dtype::BF16, n, 77, false);
    std::vector<uint16_t> got(n);
    ASSERT_TRUE(k::MergeRows(Dtype::BF16, w.data(), Dtype::BF16, got.data(), rows, cols, p.Factors()));
    auto ordered = [](uint16_t b) {
      return (b & 0x8000) ? -static_cast<int32_t>(b & 0x7FFF) : static_cast<int32_t>(b);
    };
    size_t exact = 0, off_by_one = 0, worse = 0;
    for (size_t i = 0; i < rows; ++i) {
      for (size_t j = 0; j < cols; ++j) {
        double acc = 0;
        for (size_t q = 0; q < rank; ++q) acc += static_cast<double>(p.left[i * rank + q]) * p.right[q * cols + j];
        const double y =
            static_cast<double>(WidenRef(Dtype::BF16, w.data(), i * cols + j)) + acc * static_cast<double>(p.scale);
        // double -> fp32 (RNE) -> bf16 (RNE): can differ from direct RNE only at a tie, i.e. by one ulp.
        const uint16_t want = ref::F32BitsToBF16(ref::FloatBits(static_cast<float>(y)));
        const int32_t d = ordered(got[i * cols + j]) - ordered(want);
        if (d == 0) {
          ++exact;
        } else if (d == 1 || d == -1) {
          ++off_by_one;
        } else {
          ++worse;
        }
      }
    }
    std::printf("[ lowrank  ] r=%zu: bf16 vs float64 merge: %zu exact, %zu one ulp, %zu worse (of %zu)\n", rank, exact,
                off_by_one, worse, n);
    EXPECT_EQ(worse, 0u);
    EXPECT_GE(static_cast<double>(exact), 0.99 * static_cast<double>(n));
  }
}

// ---- DoRA helpers ----

double NormRef(const float* v, size_t cols) {
  double p[16] = {};
  for (size_t j = 0; j < cols; ++j) p[j % 16] = p[j % 16] + static_cast<double>(v[j]) * v[j];
  for (size_t half = 8; half >= 1; half /= 2) {
    for (size_t q = 0; q < half; ++q) p[q] = p[q] + p[q + half];
  }
  return std::isnan(p[0]) ? ref::BitsDouble(0x7FF8000000000000ull) : p[0];  // any NaN: the default NaN
}

TEST(LowRank, RowSquaredNormsFixedOrder) {
  for (size_t cols : {1u, 7u, 16u, 33u, 1000u, 4099u}) {
    const size_t rows = 5;
    XorShift32 rng{static_cast<uint32_t>(cols)};
    std::vector<float> v(rows * cols);
    for (float& x : v) x = RandomFloat(rng, 100, 140);
    // Row 1: two different NaNs (their payloads must not leak); row 3: an infinity.
    v[1 * cols] = ref::BitsFloat(0xFFC00001u);
    v[1 * cols + cols / 2] = ref::BitsFloat(0x7F800123u);
    v[3 * cols + cols - 1] = -INFINITY;
    std::vector<double> want(rows);
    for (size_t i = 0; i < rows; ++i) want[i] = NormRef(v.data() + i * cols, cols);
    ForEachTarget([&] {
      std::vector<double> got(rows, -1);
      k::RowSquaredNorms(v.data(), rows, cols, got.data());
      for (size_t i = 0; i < rows; ++i) {
        EXPECT_EQ(ref::DoubleBits(got[i]), ref::DoubleBits(want[i])) << "cols " << cols << " row " << i;
        if (i == 1) EXPECT_EQ(ref::DoubleBits(got[i]), 0x7FF8000000000000ull);
        if (i == 3) EXPECT_EQ(got[i], INFINITY);
        if (i == 1 || i == 3) continue;
        long double plain = 0;
        for (size_t j = 0; j < cols; ++j) plain += static_cast<long double>(v[i * cols + j]) * v[i * cols + j];
        EXPECT_NEAR(static_cast<double>(got[i] / plain), 1.0, 1e-13);
      }
    });
  }
}

TEST(LowRank, ScaleRowsToAllDtypes) {
  const size_t rows = 9, cols = 131;
  XorShift32 rng{2718};
  std::vector<float> v(rows * cols), row_factor(rows), col_factor(cols);
  for (float& x : v) x = RandomFloat(rng, 120, 133);
  for (float& x : row_factor) x = RandomFloat(rng, 125, 129);
  for (float& x : col_factor) x = RandomFloat(rng, 125, 129);
  v[3] = ref::BitsFloat(0xFFA00001u);  // negative signalling NaN
  v[40] = -INFINITY;
  row_factor[5] = ref::BitsFloat(0x7FC00123u);  // NaN factor: row 5, and with v[5 * cols + 7] also NaN
  col_factor[7] = ref::BitsFloat(0x7FC00123u);
  v[5 * cols + 7] = ref::BitsFloat(0x7FC00456u);
  v[130] = ref::BitsFloat(0x477FF000u);  // rounds to Inf in f16 after scaling by >= 1? checked by the reference
  for (bool per_column : {false, true}) {
    for (Dtype out_dtype : kAllFloat) {
      std::vector<uint8_t> want(rows * cols * Width(out_dtype));
      for (size_t i = 0; i < rows; ++i) {
        for (size_t j = 0; j < cols; ++j) {
          const float f = per_column ? col_factor[j] : row_factor[i];
          const float x = v[i * cols + j];
          // A NaN in v wins over a NaN factor (quieted), so the fp32/f16 NaN bits are fixed.
          NarrowRef(out_dtype, want.data(), i * cols + j,
                    std::isnan(x) ? ref::BitsFloat(ref::FloatBits(x) | 0x00400000u) : x * f);
        }
      }
      ForEachTarget([&] {
        std::vector<uint8_t> got(want.size(), 0xEE);
        k::ScaleRowsTo(v.data(), rows, cols, per_column ? col_factor.data() : row_factor.data(), per_column, out_dtype,
                       got.data());
        ExpectSameElements(got, want, Width(out_dtype),
                           std::string(per_column ? "per column " : "per row ") + Name(out_dtype));
      });
    }
  }
}

TEST(LowRank, AllFinite) {
  ForEachTarget([&] {
    for (size_t n : {0u, 1u, 5u, 16u, 37u, 5000u, 9001u}) {
      std::vector<float> v(n, 1.5f);
      EXPECT_TRUE(k::AllFinite(v.data(), n)) << n;
      for (size_t pos : {size_t{0}, n / 2, n > 0 ? n - 1 : 0}) {
        if (n == 0) continue;
        for (uint32_t bad : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu}) {
          std::vector<float> x = v;
          x[pos] = ref::BitsFloat(bad);
          EXPECT_FALSE(k::AllFinite(x.data(), n)) << n << " " << pos << " " << std::hex << bad;
        }
      }
      if (n > 0) {
        v[n - 1] = ref::BitsFloat(0x7F7FFFFFu);  // FLT_MAX is finite
        v[0] = ref::BitsFloat(0x00000001u);
        EXPECT_TRUE(k::AllFinite(v.data(), n));
      }
    }
  });
}

// ---- native / WASM identity ----

uint64_t Fnv1a(const void* data, size_t bytes, uint64_t h = 0xCBF29CE484222325ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

uint64_t DigestLowRank() {
  uint64_t h = 0xCBF29CE484222325ull;
  const size_t rows = 29, cols = 517, rank = 19, n = rows * cols;
  for (float sign : {1.0f, -1.0f}) {
    const Problem p = MakeProblem(rows, cols, rank, 0.6180339f, sign, 1234);
    for (Dtype in : kAllFloat) {
      const std::vector<uint8_t> w = MakeWeights(in, n, 4321, true);
      for (Dtype out_dtype : kAllFloat) {
        std::vector<uint8_t> out(n * Width(out_dtype));
        k::MergeRows(in, w.data(), out_dtype, out.data(), rows, cols, p.Factors());
        h = Fnv1a(out.data(), out.size(), h);
        k::MergeRowsRoundDeltaFirst(in, w.data(), out_dtype, out.data(), rows, cols, p.Factors());
        h = Fnv1a(out.data(), out.size(), h);
      }
      std::vector<float> v(n);
      k::MergeRowsF32(in, w.data(), v.data(), rows, cols, p.Factors());
      h = Fnv1a(v.data(), v.size() * 4, h);
      std::vector<double> norms(rows);
      k::RowSquaredNorms(v.data(), rows, cols, norms.data());
      h = Fnv1a(norms.data(), norms.size() * 8, h);
      std::vector<float> f(cols);
      for (size_t j = 0; j < cols; ++j) f[j] = p.right[j];
      std::vector<uint16_t> scaled(n);
      k::ScaleRowsTo(v.data(), rows, cols, f.data(), true, Dtype::BF16, scaled.data());
      h = Fnv1a(scaled.data(), scaled.size() * 2, h);
    }
  }
  return h;
}

TEST(LowRankDigest, MatchesRecordedNativeDigest) {
  // Recorded natively (every x86 target agrees); the WASM build must reproduce it bit for bit.
  constexpr uint64_t kExpected = 0x14E036F9D521D588ull;
  uint64_t first = 0;
  bool have_first = false;
  ForEachTarget([&] {
    const uint64_t d = DigestLowRank();
    if (!have_first) {
      first = d;
      have_first = true;
    }
    EXPECT_EQ(d, first) << "targets disagree";
  });
  std::printf("[ lowrank  ] digest %016llx\n", static_cast<unsigned long long>(first));
  EXPECT_EQ(first, kExpected);
}

}  // namespace
