// Highway kernels for the low-rank merge declared in lowrank.h.
//
// Bit-exactness. Every output element is computed by the same sequence of IEEE fp32 operations on every
// target: acc = 0; for k ascending: acc = acc + left[i,k] * right[k,j] (a multiply, then an add, both
// rounded); t = acc * (sign * scale); y = float(w) + t; out = round_out(y). Folding the sign into the scale
// is exact (RNE is symmetric under negation). Vector lanes only hold different (i, j), never partial sums of
// one element, so the vector width cannot change any result. Two things would break this and are prevented:
//  - Fused multiply-add. GCC represents _mm256_mul_ps / _mm256_add_ps as plain vector arithmetic and, with
//    its default -ffp-contract=fast in C++, fuses them into vfmadd inside the AVX2/AVX-512 target regions
//    (whose target string includes "fma"). NoFuse() below puts an empty asm barrier on every product that
//    feeds an add, which costs no instruction but makes contraction impossible. WASM SIMD128 has no FMA.
//  - Conversions. Widening and rounding reproduce convert_scalar.h bit for bit: the F32/BF16/F16 formats are
//    fused into the kernel with the same integer code as convert.cc (never Highway's bf16 DemoteTo, which
//    truncates, nor its emulated f16 conversions, which are wrong on WASM); F64 and the F8 formats are staged
//    through fp32 rows with ConvertElements, which is exactly "widen, then round once".
// NaN in w propagates through the add (one NaN operand: the result is that NaN, quieted, on x86 and on WASM
// engines running on x86); every narrowing then applies the scalar reference's NaN rule.
//
// Speed. One merge reads W once and writes W' once; the arithmetic is 2 * rows * cols * rank flops. The row
// block is processed as micro-panels of kMR rows x all columns: a kMR x kNV register block of accumulators
// (kNV vectors of columns), one broadcast of left[i, k] per row and kNV loads of right per k. `right` is
// repacked per column super-tile into contiguous [k][kNV * lanes] panels (sized to stay in L2), so the inner
// loop streams one sequential buffer instead of `rank` rows `cols * 4` bytes apart (which all fall into the
// same few L1 sets). W is converted to fp32 in registers right before the add and rounded right after, so no
// fp32 copy of W exists; BF16 -> BF16 uses a shuffle-free "pair" layout for that (FmtBF16::LoadPair). Columns
// past the last whole vector go through a scalar loop doing the same operations.
// At low rank the per-element epilogue is what separates the kernel from its floor, so it is kept short: with
// AVX-512 the BF16 rounding is a bit test into a mask and a masked add (FmtBF16::RoundedHigh); on WASM, where a
// per-vector NaN fix is costly in V8, each register-block row is tested for NaN once (kNaNCheckPerRow) and
// rounded without the fix. The measurements behind these choices, and what was tried and dropped, are in
// docs/kernels.md ("Measurements behind the choices").
// Natively the best target is chosen at run time; the WASM build (PB_STATIC_DISPATCH) compiles SIMD128 only.

#include "kernels/lowrank.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/convert.h"
#include "kernels/convert_scalar.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/lowrank.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#ifndef PB_KERNELS_LOWRANK_ONCE
#define PB_KERNELS_LOWRANK_ONCE
namespace pb::kernels::lowrank {

// Formats fused into the merge kernel (others are staged through fp32, see MergeStaged).
enum FusedFmt : int { kFusedF32 = 0, kFusedBF16 = 1, kFusedF16 = 2 };

// What the kernel writes, with t = delta * scale * sign: float(w) + t (MergeRows), float(w) +
// float(round_w(t)) (MergeRowsRoundDeltaFirst, the embedding rule; round_w rounds to the weight's dtype), or
// t alone in fp32 (staging for the dtypes that are not fused).
enum Mode : int { kModeAdd = 0, kModeDeltaFirst = 1, kModeDeltaOnly = 2 };

// Pack buffer for `right`: at most this many floats per column super-tile (384 KiB leaves room in a 1 MiB
// L2 for the W and output streams).
constexpr size_t kPackFloats = 96 * 1024;
// Row blocks with fewer rows read `right` in place: packing costs one pass over rank x cols, which only pays
// off when each packed panel is reused by several micro-panels.
constexpr size_t kPackMinRows = 8;

// Thread-local, 64-byte-aligned scratch that only grows (bounded by kPackFloats for the pack buffer; the
// staging buffers hold a few rows). One per purpose, so that nested use cannot overlap. nullptr when the memory
// is not there: the pack buffer then reads `right` in place, the staged paths report false (OutOfMemory).
class Scratch {
 public:
  float* Get(size_t floats) {
    if (floats > capacity_) {
      data_.reset();
      capacity_ = 0;
      if (floats > (SIZE_MAX - 63) / sizeof(float)) return nullptr;
      const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
      data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
      if (!data_) return nullptr;
      capacity_ = bytes / sizeof(float);
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t capacity_ = 0;
};

// Thread-local natively (callers may merge on several threads). wasm-ld refuses thread_local without the
// atomics feature, and a WASM build without pthreads has one thread anyway.
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
#define PB_LOWRANK_THREAD_LOCAL static
#else
#define PB_LOWRANK_THREAD_LOCAL thread_local
#endif

inline float* PackScratch(size_t floats) {
  PB_LOWRANK_THREAD_LOCAL Scratch s;
  return s.Get(floats);
}

}  // namespace pb::kernels::lowrank
#endif  // PB_KERNELS_LOWRANK_ONCE

HWY_BEFORE_NAMESPACE();
namespace pb::kernels::lowrank {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 256-bit vectors on AVX-512 too: Zen 4 double-pumps 512-bit ops, and 256-bit blocks ran faster
// (docs/kernels.md); the AVX-512 target still brings the 32 registers, ternlog and fpclass.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
using DF = hn::CappedTag<float, 8>;
#else
using DF = hn::ScalableTag<float>;
#endif
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using D16 = hn::Rebind<uint16_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

// Register block: kMR rows x kNV vectors of accumulators, chosen by measurement (docs/kernels.md).
// AVX-512 has 32 registers: 4 x 4 (16 accumulators, 4 right vectors, broadcasts). AVX2/SSE4 have 16: 4 x 2
// (8 accumulators hide the 3-4 cycle add latency at two adds per cycle). WASM (V8 maps SIMD128 to 16 xmm
// registers): 2 x 4, fewer splat loads, which V8 does not fold into the multiply. kNV must be even for the pair
// layout.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kMR = 4, kNV = 4;
#elif HWY_TARGET == HWY_WASM
constexpr size_t kMR = 2, kNV = 4;
#else
constexpr size_t kMR = 4, kNV = 2;
#endif

// The pair epilogue tests a whole row of the register block for NaN at once (see Block) where a per-vector
// NaN fix costs more than the sum: on WASM (f32x4.ne plus a three-instruction bitselect per vector in V8).
#ifndef PB_LR_NAN_CHECK_PER_ROW
#define PB_LR_NAN_CHECK_PER_ROW (HWY_TARGET == HWY_WASM)
#endif
constexpr bool kNaNCheckPerRow = PB_LR_NAN_CHECK_PER_ROW;

// ---- no fused multiply-add ----
// An empty asm statement that claims to modify its operand: the compiler must materialise the rounded
// product in a register, so it cannot contract product and sum into an FMA. Emits no instruction.
#if HWY_ARCH_X86 && (HWY_COMPILER_GCC || HWY_COMPILER_CLANG) && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
#if HWY_TARGET <= HWY_AVX3
#define PB_NO_FUSE_CONSTRAINT "+v"  // any of zmm0-31
#else
#define PB_NO_FUSE_CONSTRAINT "+x"
#endif
HWY_INLINE VF NoFuse(VF v) {
  asm("" : PB_NO_FUSE_CONSTRAINT(v.raw));
  return v;
}
HWY_INLINE float NoFuse(float x) {
  asm("" : "+x"(x));
  return x;
}
#undef PB_NO_FUSE_CONSTRAINT
#else
// WASM has no FMA; EMU128/SCALAR are compiled for the baseline ISA, which has none either.
HWY_INLINE VF NoFuse(VF v) { return v; }
HWY_INLINE float NoFuse(float x) { return x; }
#endif

HWY_INLINE VF MulNoFuse(VF a, VF b) { return NoFuse(hn::Mul(a, b)); }

// ---- fused formats: Load = exact widening of Lanes(DF) elements, Store = one rounding ----
// Same arithmetic as FmtF32 / FmtBF16 / FmtF16 in convert.cc (which are private to that file); the scalar
// forms are the reference functions themselves.

struct FmtF32 {
  using T = float;
  using Bits = uint32_t;
  static constexpr bool kPairs = false;
  static HWY_INLINE VF Load(const T* p) { return hn::LoadU(DF(), p); }
  static HWY_INLINE void Store(VF v, T* p) { hn::StoreU(v, DF(), p); }
  static HWY_INLINE VF RoundTrip(VF v) { return v; }
  static float ToF32(Bits b) { return scalar::BitsFloat(b); }
  static Bits FromF32(float f) { return scalar::FloatBits(f); }
};

struct FmtBF16 {
  using T = uint16_t;
  using Bits = uint16_t;
  static HWY_INLINE VF Load(const T* p) {
    return hn::BitCast(DF(), hn::ShiftLeft<16>(hn::PromoteTo(DU(), hn::LoadU(D16(), p))));
  }
  // Round to nearest even on the bits (Highway 1.0.3's DemoteTo to bf16 truncates); NaN -> 0x7FC0.
  static HWY_INLINE void Store(VF v, T* p) {
    const DI di;
    const DU du;
    const VI w = hn::BitCast(di, v);
    const auto u = hn::BitCast(du, w);
    const auto bias = hn::Add(hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)), hn::Set(du, 0x7FFFu));
    VI r = hn::BitCast(di, hn::ShiftRight<16>(hn::Add(u, bias)));
    const auto is_nan = hn::Gt(hn::And(w, hn::Set(di, 0x7FFFFFFF)), hn::Set(di, 0x7F800000));
    r = hn::IfThenElse(is_nan, hn::Set(di, 0x7FC0), r);
    hn::StoreU(hn::DemoteTo(D16(), r), D16(), p);
  }
  static float ToF32(Bits b) { return scalar::BitsFloat(scalar::BF16ToF32Bits(b)); }
  static Bits FromF32(float f) { return scalar::F32BitsToBF16(scalar::FloatBits(f)); }
  // float(bf16(v)): the rounded value with the low half cleared.
  static HWY_INLINE VF RoundTrip(VF v) {
    return hn::BitCast(DF(), hn::And(RoundedHigh(v), hn::Set(DU(), 0xFFFF0000u)));
  }

  // Pair layout: 2 * Lanes(DF) consecutive bf16 read as Lanes(DF) u32 lanes. Lane q holds columns 2q (low
  // half) and 2q + 1 (high half), so `even` = lanes << 16 and `odd` = lanes & 0xFFFF0000 widen them without
  // any shuffle, and rounding puts them back with one shift and one mask. The accumulators then hold the
  // even and odd columns of the pair; PackTile orders `right` to match. Fewer instructions than Load/Store
  // (no zero-extension, one store per two vectors), which matters because the epilogue shares the vector
  // pipes with the k loop: -22 % time at rank 16 with AVX-512 (256-bit), -11 % with AVX2.
  static constexpr bool kPairs = true;
  static HWY_INLINE void LoadPair(const T* p, VF& even, VF& odd) {
    const DU du;
    const auto x = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p));
    even = hn::BitCast(DF(), hn::ShiftLeft<16>(x));
    odd = hn::BitCast(DF(), hn::And(x, hn::Set(du, 0xFFFF0000u)));
  }
  // f32 bits + rounding bias: the bf16 result (RNE) is the high half; NaN -> 0x7FC0 in the high half.
  static HWY_INLINE hn::Vec<DU> RoundedHigh(VF v) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    // AVX-512 (DF is 256-bit here): the bias is 0x7FFF, or 0x8000 where the lowest kept bit (bit 16) is
    // set, i.e. a test into a mask and a masked add instead of a shift, an and and a second add; the NaN
    // lanes are found by fpclass (quiet | signalling) and overwritten by a masked move. Same bits, one
    // vector operation fewer per 8 elements in an epilogue that shares the pipes with the k loop.
    const __m256i u = _mm256_castps_si256(v.raw);
    const __mmask8 odd = _mm256_test_epi32_mask(u, _mm256_set1_epi32(0x10000));
    __m256i r = _mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF));
    r = _mm256_mask_add_epi32(r, odd, u, _mm256_set1_epi32(0x8000));
    r = _mm256_mask_mov_epi32(r, _mm256_fpclass_ps_mask(v.raw, 0x81), _mm256_set1_epi32(0x7FC00000));
    return hn::Vec<DU>{r};
#else
    const DU du;
    const auto u = hn::BitCast(du, v);
    const auto r = hn::Add(u, hn::Add(hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)), hn::Set(du, 0x7FFFu)));
    return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Set(du, 0x7FC00000u), r);
#endif
  }
  static HWY_INLINE void StorePair(VF even, VF odd, T* p) {
    const DU du;
    const auto packed =
        hn::Or(hn::ShiftRight<16>(RoundedHigh(even)), hn::And(RoundedHigh(odd), hn::Set(du, 0xFFFF0000u)));
    hn::StoreU(packed, du, reinterpret_cast<uint32_t*>(p));
  }
  // StorePair for values known not to be NaN (the caller checked): the rounding alone.
  static HWY_INLINE hn::Vec<DU> RoundedHighNotNaN(VF v) {
    const DU du;
    const auto u = hn::BitCast(du, v);
    return hn::Add(u, hn::Add(hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)), hn::Set(du, 0x7FFFu)));
  }
  static HWY_INLINE void StorePairNotNaN(VF even, VF odd, T* p) {
    const DU du;
    const auto packed =
        hn::Or(hn::ShiftRight<16>(RoundedHighNotNaN(even)), hn::And(RoundedHighNotNaN(odd), hn::Set(du, 0xFFFF0000u)));
    hn::StoreU(packed, du, reinterpret_cast<uint32_t*>(p));
  }
};

struct FmtF16 {
  using T = uint16_t;
  using Bits = uint16_t;
  static constexpr bool kPairs = false;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  // F16C, as in convert.cc: vcvtph2ps equals the reference (signalling NaNs quieted, payload kept);
  // vcvtps2ph (RNE) does too once NaNs are canonicalised to sign | 0x7FC00000.
  static HWY_INLINE VF Load(const T* p) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(DF(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static HWY_INLINE hn::Vec<hn::Rebind<hwy::float16_t, DF>> Narrow(VF v) {
    const DI di;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const VI w = hn::BitCast(di, v);
    const VI qnan = hn::Or(hn::And(w, hn::Set(di, static_cast<int32_t>(0x80000000u))), hn::Set(di, 0x7FC00000));
    const VI fixed = hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(v)), qnan, w);
    return hn::DemoteTo(dh, hn::BitCast(DF(), fixed));
  }
  static HWY_INLINE void Store(VF v, T* p) { hn::StoreU(hn::BitCast(D16(), Narrow(v)), D16(), p); }
  static HWY_INLINE VF RoundTrip(VF v) { return hn::PromoteTo(DF(), Narrow(v)); }
#else
  // Integer kernels (Highway's emulated f16 conversions are wrong on Inf/NaN and truncate).
  static HWY_INLINE VF Load(const T* p) {
    return WidenBits(hn::BitCast(DI(), hn::PromoteTo(DU(), hn::LoadU(D16(), p))));
  }
  static HWY_INLINE void Store(VF v, T* p) { hn::StoreU(hn::DemoteTo(D16(), NarrowBits(v)), D16(), p); }
  static HWY_INLINE VF RoundTrip(VF v) { return WidenBits(NarrowBits(v)); }
  // f16 bits (zero-extended in i32 lanes) -> f32, as scalar::F16ToF32Bits.
  static HWY_INLINE VF WidenBits(VI h) {
    const DF df;
    const DI di;
    const VI sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(di, 0x8000)));
    const VI shifted = hn::ShiftLeft<13>(hn::And(h, hn::Set(di, 0x7FFF)));
    const auto is_inf_nan = hn::Gt(shifted, hn::Set(di, 0x0F7FFFFF));
    const auto is_nan = hn::Gt(shifted, hn::Set(di, 0x0F800000));
    VI normal = hn::Add(shifted, hn::IfThenElse(is_inf_nan, hn::Set(di, 0x70000000), hn::Set(di, 0x38000000)));
    normal = hn::Or(normal, hn::IfThenElseZero(is_nan, hn::Set(di, 0x00400000)));  // quiet NaN
    // Subnormal (and zero): (2^-14 with mantissa m << 13) - 2^-14 = m * 2^-24, exact.
    const VI sub = hn::BitCast(
        di, hn::Sub(hn::BitCast(df, hn::Or(shifted, hn::Set(di, 0x38800000))), hn::Set(df, 6.103515625e-05f)));
    const auto is_sub = hn::Lt(shifted, hn::Set(di, 0x00800000));
    return hn::BitCast(df, hn::Or(hn::IfThenElse(is_sub, sub, normal), sign));
  }
  // f32 -> f16 bits in i32 lanes, as scalar::F32BitsToF16.
  static HWY_INLINE VI NarrowBits(VF v) {
    const DF df;
    const DI di;
    const VI w = hn::BitCast(di, v);
    const VI sign = hn::And(hn::ShiftRight<16>(w), hn::Set(di, 0x8000));
    const VI a = hn::And(w, hn::Set(di, 0x7FFFFFFF));
    const VI odd = hn::And(hn::ShiftRight<13>(a), hn::Set(di, 1));
    const VI norm = hn::ShiftRight<13>(hn::Add(hn::Add(a, hn::Set(di, 0xFFF - 0x38000000)), odd));
    // Subnormal result: |x| + 0.5f rounds (RNE) to a multiple of 2^-24.
    const VI sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, 0.5f))), hn::Set(di, 0x3F000000));
    VI r = hn::IfThenElse(hn::Lt(a, hn::Set(di, 0x38800000)), sub, norm);
    r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x477FEFFF)), hn::Set(di, 0x7C00), r);  // >= 65520
    r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7F800000)), hn::Set(di, 0x7E00), r);  // NaN
    return hn::Or(r, sign);
  }
#endif
  static float ToF32(Bits b) { return scalar::BitsFloat(scalar::F16ToF32Bits(b)); }
  static Bits FromF32(float f) { return scalar::F32BitsToF16(scalar::FloatBits(f)); }
};

// ---- the merge ----

// One register block: rows [0, MR) x columns [0, NV * lanes) of the current position. `w`/`out` point at
// the block's first element (row strides ldw/ldo); `lp` at left[row 0, 0]; right[k, block column c] is at
// rp[k * kstride + c]; t = delta * scale * sign is combined with w as kMode says. w and out may alias (each
// element is loaded before it is stored), so they are not restrict.
// kPairs: W and W' in the pair layout (FmtBF16::LoadPair), NV even, `right` packed to match.
template <class Src, class Dst, size_t MR, size_t NV, int kMode, bool kPairs = false>
HWY_INLINE void Block(const typename Src::T* w, size_t ldw, typename Dst::T* out, size_t ldo,
                      const float* HWY_RESTRICT lp, size_t rank, const float* HWY_RESTRICT rp, size_t kstride, VF st) {
  const DF df;
  const size_t N = hn::Lanes(df);
  // The accumulators must live in registers: every loop over r and v is unrolled completely (GCC does not
  // do it on its own at -O2).
  VF acc[MR][NV];
  HWY_UNROLL(16)
  for (size_t r = 0; r < MR; ++r) {
    HWY_UNROLL(16)
    for (size_t v = 0; v < NV; ++v) acc[r][v] = hn::Zero(df);
  }
  // Pointers advanced once per k step (rather than k * kstride and r * rank + k per access): em++ kept an
  // i32.mul and several adds per step for those, and V8's code for the WASM k loop is bound by how many
  // instructions it issues per cycle, not by the multiplies and adds alone.
  const float* HWY_RESTRICT rk = rp;
  const float* HWY_RESTRICT lk[MR];
  HWY_UNROLL(16)
  for (size_t r = 0; r < MR; ++r) lk[r] = lp + r * rank;
  for (size_t k = 0; k < rank; ++k) {
    VF b[NV];
    HWY_UNROLL(16)
    for (size_t v = 0; v < NV; ++v) b[v] = hn::LoadU(df, rk + v * N);
    rk += kstride;
    HWY_UNROLL(16)
    for (size_t r = 0; r < MR; ++r) {
      const VF a = hn::Set(df, *lk[r]++);
      HWY_UNROLL(16)
      for (size_t v = 0; v < NV; ++v) acc[r][v] = hn::Add(acc[r][v], MulNoFuse(a, b[v]));
    }
  }
  HWY_UNROLL(16)
  for (size_t r = 0; r < MR; ++r) {
    if constexpr (kPairs) {
      // y = float(w) + t for the row's NV vectors, kept in the accumulators.
      HWY_UNROLL(16)
      for (size_t v = 0; v < NV; v += 2) {
        VF w_even, w_odd;
        Src::LoadPair(w + r * ldw + v * N, w_even, w_odd);
        VF t_even = NoFuse(hn::Mul(acc[r][v], st));
        VF t_odd = NoFuse(hn::Mul(acc[r][v + 1], st));
        if constexpr (kMode == kModeDeltaFirst) {
          t_even = Src::RoundTrip(t_even);
          t_odd = Src::RoundTrip(t_odd);
        }
        acc[r][v] = hn::Add(w_even, t_even);
        acc[r][v + 1] = hn::Add(w_odd, t_odd);
      }
      if constexpr (kNaNCheckPerRow) {
        // One NaN test for the row instead of one per vector: the sum of all its y is NaN if any y is
        // (Inf + -Inf also gives NaN: a false alarm that only costs the careful path). Without NaN, the
        // rounding needs no NaN fix.
        VF sum = acc[r][0];
        HWY_UNROLL(16)
        for (size_t v = 1; v < NV; ++v) sum = hn::Add(sum, acc[r][v]);
        if (HWY_LIKELY(hn::AllFalse(df, hn::IsNaN(sum)))) {
          HWY_UNROLL(16)
          for (size_t v = 0; v < NV; v += 2) Dst::StorePairNotNaN(acc[r][v], acc[r][v + 1], out + r * ldo + v * N);
          continue;
        }
      }
      HWY_UNROLL(16)
      for (size_t v = 0; v < NV; v += 2) Dst::StorePair(acc[r][v], acc[r][v + 1], out + r * ldo + v * N);
    } else {
      HWY_UNROLL(16)
      for (size_t v = 0; v < NV; ++v) {
        const VF t = NoFuse(hn::Mul(acc[r][v], st));
        if constexpr (kMode == kModeDeltaOnly) {
          Dst::Store(t, out + r * ldo + v * N);
        } else if constexpr (kMode == kModeDeltaFirst) {
          Dst::Store(hn::Add(Src::Load(w + r * ldw + v * N), Src::RoundTrip(t)), out + r * ldo + v * N);
        } else {
          Dst::Store(hn::Add(Src::Load(w + r * ldw + v * N), t), out + r * ldo + v * N);
        }
      }
    }
  }
}

// Asks for the cache lines of [p, p + bytes) to be brought into L2 (not L1, where the next panel's rows
// would evict the current working set). A hint only; nothing on WASM.
HWY_INLINE void PrefetchL2(const void* p, size_t bytes) {
#if HWY_ARCH_X86 && (HWY_COMPILER_GCC || HWY_COMPILER_CLANG)
  const auto* c = static_cast<const char*>(p);
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 2);
#else
  (void)p;
  (void)bytes;
#endif
}

// Rows [0, MR) x the vector columns [j0, j1) of a super-tile. With `tile` (packed right, see PackTile) the
// blocks read consecutive panels; without, they read `right` in place (row stride cols).
// `next` (or null) is the next panel's first row of W: while this panel computes, the same columns of the
// next panel's rows are prefetched block by block, so that W's DRAM latency is never exposed. (The hardware
// prefetchers alone left 15-20 % on the table at rank 64: they stop at every 4 KiB page, and the four rows
// of a panel each cross one every 2048 bf16 columns.)
template <class Src, class Dst, size_t MR, int kMode, bool kPairs>
HWY_INLINE void Panel(const typename Src::T* w, typename Dst::T* out, size_t cols, const float* lp, size_t rank,
                      const float* right, const float* tile, size_t j0, size_t j1, VF st, const typename Src::T* next) {
  const size_t N = hn::Lanes(DF());
  const size_t NB = kNV * N;
  size_t j = j0;
  // The packed panels' position as an offset: without a tile, stepping a null pointer would be undefined. For
  // the same reason W's columns are not formed in delta-only mode (w is null there).
  size_t at = 0;
  auto w_at = [&](size_t col) { return kMode == kModeDeltaOnly ? w : w + col; };
  for (; j + NB <= j1; j += NB) {
    if (next != nullptr) {
      for (size_t r = 0; r < kMR; ++r) PrefetchL2(next + r * cols + j, NB * sizeof(typename Src::T));
    }
    const float* rp = tile ? tile + at : right + j;
    Block<Src, Dst, MR, kNV, kMode, kPairs>(w_at(j), cols, out + j, cols, lp, rank, rp, tile ? NB : cols, st);
    at += rank * NB;
  }
  for (; j + N <= j1; j += N) {
    const float* rp = tile ? tile + at : right + j;
    Block<Src, Dst, MR, 1, kMode>(w_at(j), cols, out + j, cols, lp, rank, rp, tile ? N : cols, st);
    at += rank * N;
  }
}

// Copies right[:, j0:j1) into consecutive [rank][NB] panels (then [rank][N] panels for the remaining whole
// vectors), in the order Panel visits them. With `pairs`, each 2N-column pair of an NB panel is stored as
// its N even columns, then its N odd columns (the pair layout of FmtBF16).
HWY_NOINLINE const float* PackTile(const float* right, size_t cols, size_t rank, size_t j0, size_t j1, bool pairs) {
  const size_t N = hn::Lanes(DF());
  const size_t NB = kNV * N;
  float* buf = PackScratch((j1 - j0) * rank);
  if (!buf) return nullptr;  // no memory for the pack: the caller reads `right` in place
  float* p = buf;
  size_t j = j0;
  for (; j + NB <= j1; j += NB) {
    for (size_t k = 0; k < rank; ++k, p += NB) {
      const float* src = right + k * cols + j;
      if (pairs) {
        for (size_t base = 0; base < NB; base += 2 * N) {
#if HWY_TARGET == HWY_SCALAR
          p[base] = src[base];
          p[base + 1] = src[base + 1];
#else
          const DF df;
          const VF lo = hn::LoadU(df, src + base), hi = hn::LoadU(df, src + base + N);
          hn::StoreU(hn::ConcatEven(df, hi, lo), df, p + base);
          hn::StoreU(hn::ConcatOdd(df, hi, lo), df, p + base + N);
#endif
        }
      } else {
        std::memcpy(p, src, NB * sizeof(float));
      }
    }
  }
  for (; j + N <= j1; j += N) {
    for (size_t k = 0; k < rank; ++k, p += N) std::memcpy(p, right + k * cols + j, N * sizeof(float));
  }
  return buf;
}

// All rows x the columns [j0, j1): kMR-row panels, then single rows. Deliberately not inlined (nor is
// PackTile): inlined into MergeBlock, GCC's code for the k loop depended on unrelated changes elsewhere in the
// file (docs/kernels.md); as a function of its own it no longer does. Costs one call per column super-tile.
template <class Src, class Dst, int kMode, bool kPairs>
HWY_NOINLINE void Panels(const typename Src::T* w, typename Dst::T* out, size_t rows, size_t cols, const float* left,
                         size_t rank, const float* right, const float* tile, size_t j0, size_t j1, VF st) {
  // In delta-only mode there is no W (w is null): its row pointers are not formed, as offsetting a null pointer is
  // undefined even when nothing reads through it.
  auto row = [&](size_t r) { return kMode == kModeDeltaOnly ? w : w + r * cols; };
  size_t i = 0;
  for (; i + kMR <= rows; i += kMR) {
    const auto* next = (kMode != kModeDeltaOnly && i + 2 * kMR <= rows) ? row(i + kMR) : nullptr;
    Panel<Src, Dst, kMR, kMode, kPairs>(row(i), out + i * cols, cols, left + i * rank, rank, right, tile, j0, j1, st,
                                        next);
  }
  for (; i < rows; ++i) {
    Panel<Src, Dst, 1, kMode, kPairs>(row(i), out + i * cols, cols, left + i * rank, rank, right, tile, j0, j1, st,
                                      nullptr);
  }
}

template <class Src, class Dst, int kMode>
void MergeBlock(const void* w_void, void* out_void, size_t rows, size_t cols, const float* left, const float* right,
                size_t rank, float st_scalar) {
  using TS = typename Src::T;
  using TD = typename Dst::T;
  const auto* w = static_cast<const TS*>(w_void);
  auto* out = static_cast<TD*>(out_void);
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t NB = kNV * N;
  const VF st = hn::Set(df, st_scalar);
  const size_t cols_vec = cols / N * N;

  const bool pack = rows >= kPackMinRows && cols_vec > 0 && rank > 0;
  // The pair layout needs the packed, reordered `right`.
  constexpr bool kPairsPossible = Src::kPairs && Dst::kPairs && kMode != kModeDeltaOnly && kNV % 2 == 0;
  const bool pairs = kPairsPossible && pack;
  size_t tile_cols = cols_vec;
  if (pack) tile_cols = std::max(NB, kPackFloats / rank / NB * NB);
  for (size_t j0 = 0; j0 < cols_vec; j0 += tile_cols) {
    const size_t j1 = std::min(cols_vec, j0 + tile_cols);
    const float* tile = pack ? PackTile(right, cols, rank, j0, j1, pairs) : nullptr;
    if constexpr (kPairsPossible) {
      if (pairs) {
        Panels<Src, Dst, kMode, true>(w, out, rows, cols, left, rank, right, tile, j0, j1, st);
        continue;
      }
    }
    Panels<Src, Dst, kMode, false>(w, out, rows, cols, left, rank, right, tile, j0, j1, st);
  }
  // Columns past the last whole vector: the same operations, one element at a time.
  for (size_t i = 0; i < rows && cols_vec < cols; ++i) {
    for (size_t j = cols_vec; j < cols; ++j) {
      float acc = 0.0f;
      for (size_t k = 0; k < rank; ++k) acc = acc + NoFuse(left[i * rank + k] * right[k * cols + j]);
      float t = NoFuse(acc * st_scalar);
      if constexpr (kMode == kModeDeltaFirst) t = Src::ToF32(Src::FromF32(t));
      float y = t;
      if constexpr (kMode != kModeDeltaOnly) y = Src::ToF32(scalar::LoadAt<typename Src::Bits>(w, i * cols + j)) + t;
      scalar::StoreAt<typename Dst::Bits>(out, i * cols + j, Dst::FromF32(y));
    }
  }
}

using MergeFn = void (*)(const void*, void*, size_t, size_t, const float*, const float*, size_t, float);

template <class Src, int kMode>
MergeFn PickMergeDst(int dst) {
  switch (dst) {
    case kFusedF32: return &MergeBlock<Src, FmtF32, kMode>;
    case kFusedBF16: return &MergeBlock<Src, FmtBF16, kMode>;
    default: return &MergeBlock<Src, FmtF16, kMode>;
  }
}

template <int kMode>
MergeFn PickMerge(int src, int dst) {
  switch (src) {
    case kFusedF32: return PickMergeDst<FmtF32, kMode>(dst);
    case kFusedBF16: return PickMergeDst<FmtBF16, kMode>(dst);
    default: return PickMergeDst<FmtF16, kMode>(dst);
  }
}

// src/dst: FusedFmt codes; mode: Mode (kModeDeltaOnly: out is fp32, w unused, src/dst ignored).
void MergeImpl(int src, int dst, int mode, const void* w, void* out, size_t rows, size_t cols, const float* left,
               const float* right, size_t rank, float st) {
  MergeFn fn;
  switch (mode) {
    case kModeAdd: fn = PickMerge<kModeAdd>(src, dst); break;
    case kModeDeltaFirst: fn = PickMerge<kModeDeltaFirst>(src, dst); break;
    default: fn = &MergeBlock<FmtF32, FmtF32, kModeDeltaOnly>; break;
  }
  fn(w, out, rows, cols, left, right, rank, st);
}

// ---- DoRA helpers ----

// y = v * f, except that a NaN in v wins (quieted) over a NaN factor: with both operands NaN the hardware
// returns the first operand's NaN and the compiler may commute them, so this fixes the payload and sign for
// fp32/f16 outputs. (A NaN factor arises from a row whose norm is NaN, i.e. one that contains a NaN.)
HWY_INLINE VF ScaleOne(VF v, VF f) {
  const DI di;
  const VF quiet_v = hn::BitCast(DF(), hn::Or(hn::BitCast(di, v), hn::Set(di, 0x00400000)));
  return hn::IfThenElse(hn::IsNaN(v), quiet_v, hn::Mul(v, f));
}
HWY_INLINE float ScaleOne(float v, float f) {
  return v != v ? scalar::BitsFloat(scalar::FloatBits(v) | 0x00400000u) : v * f;
}

template <class Dst>
void ScaleRows(const float* v, size_t rows, size_t cols, const float* factor, bool per_column, void* out_void) {
  using TD = typename Dst::T;
  auto* out = static_cast<TD*>(out_void);
  const DF df;
  const size_t N = hn::Lanes(df);
  for (size_t i = 0; i < rows; ++i) {
    const float* vi = v + i * cols;
    TD* oi = out + i * cols;
    size_t j = 0;
    if (per_column) {
      for (; j + N <= cols; j += N) Dst::Store(ScaleOne(hn::LoadU(df, vi + j), hn::LoadU(df, factor + j)), oi + j);
      for (; j < cols; ++j) scalar::StoreAt<typename Dst::Bits>(oi, j, Dst::FromF32(ScaleOne(vi[j], factor[j])));
    } else {
      const VF f = hn::Set(df, factor[i]);
      for (; j + N <= cols; j += N) Dst::Store(ScaleOne(hn::LoadU(df, vi + j), f), oi + j);
      for (; j < cols; ++j) scalar::StoreAt<typename Dst::Bits>(oi, j, Dst::FromF32(ScaleOne(vi[j], factor[i])));
    }
  }
}

void ScaleImpl(int dst, const float* v, size_t rows, size_t cols, const float* factor, bool per_column, void* out) {
  switch (dst) {
    case kFusedF32: return ScaleRows<FmtF32>(v, rows, cols, factor, per_column, out);
    case kFusedBF16: return ScaleRows<FmtBF16>(v, rows, cols, factor, per_column, out);
    default: return ScaleRows<FmtF16>(v, rows, cols, factor, per_column, out);
  }
}

// Sum of squares per row in double, in a fixed order that does not depend on the vector width: element j
// goes to partial sum j % 16 (each partial accumulates sequentially), then the 16 partials are combined by
// halving (p[q] + p[q + 8], then + 4, + 2, + 1). A float squared is exact in double, so whether a compiler
// contracts the square into an FMA cannot change any result either.
constexpr size_t kNormPartials = 16;

HWY_INLINE double CombinePartials(double* p) {
  for (size_t half = kNormPartials / 2; half >= 1; half /= 2) {
    for (size_t q = 0; q < half; ++q) p[q] = p[q] + p[q + half];
  }
  return p[0];
}

void RowSquaredNormsImpl(const float* v, size_t rows, size_t cols, double* out) {
  for (size_t i = 0; i < rows; ++i) {
    const float* vi = v + i * cols;
    alignas(64) double p[kNormPartials];
    size_t j = 0;
#if HWY_HAVE_FLOAT64 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_WASM
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df_half;
    const size_t ND = hn::Lanes(dd);
    if (kNormPartials % ND == 0) {
      constexpr size_t kMaxVecs = kNormPartials;  // enough for 1-lane vectors
      hn::Vec<decltype(dd)> s[kMaxVecs];
      const size_t nv = kNormPartials / ND;
      for (size_t q = 0; q < nv; ++q) s[q] = hn::Zero(dd);
      for (; j + kNormPartials <= cols; j += kNormPartials) {
        for (size_t q = 0; q < nv; ++q) {
          const auto x = hn::PromoteTo(dd, hn::LoadU(df_half, vi + j + q * ND));
          s[q] = hn::Add(s[q], hn::Mul(x, x));
        }
      }
      for (size_t q = 0; q < nv; ++q) hn::Store(s[q], dd, p + q * ND);
    } else {
      std::fill(p, p + kNormPartials, 0.0);
    }
#else
    std::fill(p, p + kNormPartials, 0.0);
#endif
    // Remaining elements (all of them without f64 vectors), continuing each partial's sequence.
    for (; j < cols; ++j) {
      const double x = vi[j];
      p[j % kNormPartials] = p[j % kNormPartials] + x * x;
    }
    const double sum = CombinePartials(p);
    // Several NaNs meeting in one add give the first operand's NaN on x86, and compilers may commute the
    // operands, so the payload would depend on the target: a row with a NaN yields the default quiet NaN.
    out[i] = sum != sum ? scalar::BitsDouble(0x7FF8000000000000ull) : sum;
  }
}

bool AllFiniteImpl(const float* v, size_t n) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI exp = hn::Set(di, 0x7F800000);
  const size_t n_vec = n / N * N;
  size_t i = 0;
  // Checked in chunks so that a non-finite value near the start ends the scan early.
  constexpr size_t kChunk = 4096;
  while (i < n_vec) {
    const size_t end = std::min(n_vec, i + kChunk);
    auto bad = hn::Zero(di);
    for (; i < end; i += N) {
      const VI bits = hn::BitCast(di, hn::LoadU(df, v + i));
      bad = hn::Or(bad, hn::VecFromMask(di, hn::Eq(hn::And(bits, exp), exp)));
    }
    if (!hn::AllFalse(di, hn::MaskFromVec(bad))) return false;
  }
  for (; i < n; ++i) {
    if ((scalar::FloatBits(v[i]) & 0x7F800000u) == 0x7F800000u) return false;
  }
  return true;
}

// a[i] = a[i] + b[i] (for the staged embedding rule).
void AddF32Impl(float* a, const float* b, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Add(hn::LoadU(df, a + i), hn::LoadU(df, b + i)), df, a + i);
  for (; i < n; ++i) a[i] = a[i] + b[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace pb::kernels::lowrank
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pb::kernels {
namespace lowrank {

#ifdef PB_STATIC_DISPATCH
#define PB_LR_CALL(fn) HWY_STATIC_DISPATCH(fn)
#else
HWY_EXPORT(MergeImpl);
HWY_EXPORT(ScaleImpl);
HWY_EXPORT(RowSquaredNormsImpl);
HWY_EXPORT(AllFiniteImpl);
HWY_EXPORT(AddF32Impl);
#define PB_LR_CALL(fn) HWY_DYNAMIC_DISPATCH(fn)
#endif

namespace {

// Rows per staging panel: about 64 KiB of fp32 (at least one row).
constexpr size_t kStageFloats = 16 * 1024;

int FusedOf(Dtype t) {
  switch (t) {
    case Dtype::F32: return kFusedF32;
    case Dtype::BF16: return kFusedBF16;
    case Dtype::F16: return kFusedF16;
    default: return -1;
  }
}

size_t Width(Dtype t) { return DtypeBits(t) / 8; }

size_t StageRows(size_t cols) { return std::max<size_t>(1, kStageFloats / cols); }

// Staging buffers, thread-local like the pack buffer; two, for the embedding rule.
float* StageScratch(size_t floats, int which) {
  PB_LOWRANK_THREAD_LOCAL Scratch s[2];
  return s[which].Get(floats);
}

// Merge where `in` or `out_dtype` is not fused (F64, F8): per panel of rows, widen W to fp32 if needed, run
// the fused kernel with fp32 on that side, round to `out_dtype` if needed. Every conversion is the
// reference's, so the result equals the definition (widen exactly, one fp32 add, round once).
bool MergeStaged(Dtype in, const void* w, Dtype out_dtype, void* out, size_t rows, size_t cols, const LowRankFactors& f,
                 float st) {
  const int src = FusedOf(in), dst = FusedOf(out_dtype);
  const size_t panel = StageRows(cols);
  float* stage = StageScratch(panel * cols, 0);
  if (!stage) return false;
  const auto* wb = static_cast<const uint8_t*>(w);
  auto* ob = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < rows; i += panel) {
    const size_t n = std::min(panel, rows - i);
    const void* wi = wb + i * cols * Width(in);
    void* oi = ob + i * cols * Width(out_dtype);
    if (src < 0) ConvertElements(in, Dtype::F32, wi, stage, n * cols);
    PB_LR_CALL(MergeImpl)
    (src < 0 ? kFusedF32 : src, dst < 0 ? kFusedF32 : dst, kModeAdd, src < 0 ? stage : wi,
     dst < 0 ? static_cast<void*>(stage) : oi, n, cols, f.left + i * f.rank, f.right, f.rank, st);
    if (dst < 0) ConvertElements(Dtype::F32, out_dtype, stage, oi, n * cols);
  }
  return true;
}

}  // namespace
}  // namespace lowrank

using namespace lowrank;

bool MergeRows(Dtype in, const void* w, Dtype out_dtype, void* out, size_t rows, size_t cols, const LowRankFactors& f) {
  if (!IsConvertibleFloat(in) || !IsConvertibleFloat(out_dtype)) return false;
  if (rows == 0 || cols == 0) return true;
  const float st = f.scale * f.sign;  // exact: sign is +-1
  const int src = FusedOf(in), dst = FusedOf(out_dtype);
  if (src < 0 || dst < 0) return MergeStaged(in, w, out_dtype, out, rows, cols, f, st);
  PB_LR_CALL(MergeImpl)(src, dst, kModeAdd, w, out, rows, cols, f.left, f.right, f.rank, st);
  return true;
}

bool MergeRowsF32(Dtype in, const void* w, float* v, size_t rows, size_t cols, const LowRankFactors& f) {
  return MergeRows(in, w, Dtype::F32, v, rows, cols, f);
}

// out = round_out(float(w) + float(round_w(t))). Fused like MergeRows when both dtypes are (the kernel
// rounds t to the weight's dtype in registers); otherwise per panel: t into one fp32 buffer, rounded to the
// weight dtype and widened back (both by the reference conversions), W widened into a second buffer, one add,
// one final rounding, all in cache-sized panels.
bool MergeRowsRoundDeltaFirst(Dtype in, const void* w, Dtype out_dtype, void* out, size_t rows, size_t cols,
                              const LowRankFactors& f) {
  if (!IsConvertibleFloat(in) || !IsConvertibleFloat(out_dtype)) return false;
  if (rows == 0 || cols == 0) return true;
  const float st = f.scale * f.sign;
  const int src = FusedOf(in), dst = FusedOf(out_dtype);
  if (src >= 0 && dst >= 0) {
    PB_LR_CALL(MergeImpl)(src, dst, kModeDeltaFirst, w, out, rows, cols, f.left, f.right, f.rank, st);
    return true;
  }
  const size_t panel = StageRows(cols);
  float* delta = StageScratch(panel * cols, 0);
  float* wide = StageScratch(panel * cols, 1);
  if (!delta || !wide) return false;
  // The delta rounded to `in`: reuses `wide` (before W is widened into it) when `in` is no wider than fp32.
  std::vector<double> narrow_f64;
  const auto* wb = static_cast<const uint8_t*>(w);
  auto* ob = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < rows; i += panel) {
    const size_t n = std::min(panel, rows - i);
    const size_t count = n * cols;
    PB_LR_CALL(MergeImpl)
    (kFusedF32, kFusedF32, kModeDeltaOnly, nullptr, delta, n, cols, f.left + i * f.rank, f.right, f.rank, st);
    if (in != Dtype::F32) {
      void* narrow = wide;
      if (Width(in) > sizeof(float)) {
        narrow_f64.resize(count);
        narrow = narrow_f64.data();
      }
      ConvertElements(Dtype::F32, in, delta, narrow, count);
      ConvertElements(in, Dtype::F32, narrow, delta, count);
    }
    ConvertElements(in, Dtype::F32, wb + i * cols * Width(in), wide, count);
    PB_LR_CALL(AddF32Impl)(wide, delta, count);
    ConvertElements(Dtype::F32, out_dtype, wide, ob + i * cols * Width(out_dtype), count);
  }
  return true;
}

void RowSquaredNorms(const float* v, size_t rows, size_t cols, double* out) {
  PB_LR_CALL(RowSquaredNormsImpl)(v, rows, cols, out);
}

bool ScaleRowsTo(const float* v, size_t rows, size_t cols, const float* factor, bool per_column, Dtype out_dtype,
                 void* out) {
  if (rows == 0 || cols == 0) return true;
  const int dst = FusedOf(out_dtype);
  if (dst >= 0) {
    PB_LR_CALL(ScaleImpl)(dst, v, rows, cols, factor, per_column, out);
    return true;
  }
  // F64 / F8 output: scale into fp32 panels, then round with the reference conversion.
  const size_t panel = StageRows(cols);
  float* stage = StageScratch(panel * cols, 0);
  if (!stage) return false;
  auto* ob = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < rows; i += panel) {
    const size_t n = std::min(panel, rows - i);
    PB_LR_CALL(ScaleImpl)(kFusedF32, v + i * cols, n, cols, per_column ? factor : factor + i, per_column, stage);
    ConvertElements(Dtype::F32, out_dtype, stage, ob + i * cols * Width(out_dtype), n * cols);
  }
  return true;
}

bool DoraRowsF64(Dtype in, const void* w, Dtype out_dtype, void* out, size_t rows, size_t cols, const LowRankFactors& f,
                 const float* magnitude) {
  if (!IsConvertibleFloat(in) || !IsConvertibleFloat(out_dtype)) return false;
  if (rows == 0 || cols == 0) return true;
  const double st = static_cast<double>(f.scale) * f.sign;
  std::vector<float> wide(cols), result(cols);
  std::vector<double> v(cols);
  const auto* wb = static_cast<const uint8_t*>(w);
  auto* ob = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < rows; ++i) {
    ConvertElements(in, Dtype::F32, wb + i * cols * Width(in), wide.data(), cols);  // exact but for an F64 weight
    std::fill(v.begin(), v.end(), 0.0);
    const float* left = f.left + i * f.rank;
    for (size_t k = 0; k < f.rank; ++k) {  // k outer, columns inner: contiguous rows of `right`, vectorisable
      const double l = left[k];
      const float* right = f.right + k * cols;
      for (size_t j = 0; j < cols; ++j) v[j] += l * static_cast<double>(right[j]);
    }
    double sum = 0;
    for (size_t j = 0; j < cols; ++j) {
      v[j] = static_cast<double>(wide[j]) + st * v[j];
      sum += v[j] * v[j];
    }
    const double factor = static_cast<double>(magnitude[i]) / std::sqrt(sum);
    for (size_t j = 0; j < cols; ++j) result[j] = static_cast<float>(factor * v[j]);
    ConvertElements(Dtype::F32, out_dtype, result.data(), ob + i * cols * Width(out_dtype), cols);
  }
  return true;
}

bool AllFinite(const float* v, size_t n) { return PB_LR_CALL(AllFiniteImpl)(v, n); }

std::vector<float> Transposed(const std::vector<float>& m, size_t rows, size_t cols) {
  std::vector<float> t(m.size());
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) t[j * rows + i] = m[i * cols + j];
  return t;
}

}  // namespace pb::kernels
#endif  // HWY_ONCE
