// Highway kernels for the dtype conversions declared in convert.h.
//
// The exact semantics (including NaN bit patterns) are defined by the scalar reference in
// convert_scalar.h; every kernel here reproduces them bit for bit on every target. We never rely on
// Highway's bf16 DemoteTo (1.0.3 truncates) nor on its emulated f16 PromoteTo/DemoteTo (wrong on
// Inf/NaN on WASM); f16 uses integer kernels, except on AVX2/AVX-512 where the F16C instructions
// give identical bits (NaNs canonicalised first when narrowing). Floating-point arithmetic is
// used only where it is exact or IEEE-RNE on finite, non-NaN values (subnormal scaling and the
// "add a magic power of two" rounding trick), so it cannot differ between targets or engines.
// Natively the best target is chosen at run time; the WASM build (PB_STATIC_DISPATCH) compiles for
// SIMD128 only and links nothing from libhwy.

#include "kernels/convert.h"

#include <cstring>

#include "kernels/convert_scalar.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"

#ifndef PB_KERNELS_CONVERT_FORMAT_CODES
#define PB_KERNELS_CONVERT_FORMAT_CODES
namespace pb::kernels {
// Formats handled by the fused pair kernel (ConvertPairImpl).
enum FmtCode : int { kFmtF32 = 0, kFmtBF16, kFmtF16, kFmtE4M3, kFmtE5M2 };
}  // namespace pb::kernels
#endif

HWY_BEFORE_NAMESPACE();
namespace pb::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using D16 = hn::Rebind<uint16_t, DF>;
using D8 = hn::Rebind<uint8_t, DF>;
using VI = hn::Vec<DI>;

// Vector loop bodies are lambdas; make sure they are inlined into the loop (otherwise GCC calls
// them per vector and re-materialises every constant).
#ifndef PB_INLINE_LAMBDA
#define PB_INLINE_LAMBDA __attribute__((always_inline))
#endif

// Output stores: streaming (non-temporal) stores for large outputs natively, which avoids reading
// the destination into the cache first (about +50 % on buffers much larger than the cache).
// `out` must be aligned to the vector size when `stream` is set (callers arrange this).
template <class D, typename T>
HWY_INLINE void StoreOut(hn::Vec<D> v, D d, T* HWY_RESTRICT out, bool stream) {
  if (stream) {
    hn::Stream(v, d, out);
  } else {
    hn::StoreU(v, d, out);
  }
}

// Number of leading elements to process with scalar code so that `out` becomes aligned to `bytes`,
// or SIZE_MAX if that is impossible (out not even element-aligned).
template <typename T>
HWY_INLINE size_t AlignPrefix(const T* out, size_t bytes) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(out);
  if (addr % sizeof(T) != 0) return ~size_t{0};
  const uintptr_t mis = addr % bytes;
  return mis == 0 ? 0 : (bytes - mis) / sizeof(T);
}

// Runs `vec(i)` for whole vectors of `lanes` elements and `tail(begin, end)` for the rest; with
// `stream`, first aligns the output via `tail` so that the vector stores are aligned.
template <typename TOut, class VecFn, class TailFn>
HWY_INLINE void Loop(size_t n, size_t lanes, const TOut* out, size_t out_vec_bytes, bool stream, const VecFn& vec,
                     const TailFn& tail) {
  size_t i = 0;
  // x86 Stream of a partial vector writes 16 bytes anyway, so only full 16+ byte outputs stream.
  if (out_vec_bytes < 16) stream = false;
  if (stream) {
    const size_t pre = AlignPrefix(out, out_vec_bytes);
    if (pre == ~size_t{0} || pre > n) {
      stream = false;
    } else {
      tail(0, pre);
      i = pre;
    }
  }
  if (stream) {
    for (; i + lanes <= n; i += lanes) vec(i, true);
    hwy::FlushStream();
  } else {
    for (; i + lanes <= n; i += lanes) vec(i, false);
  }
  if (i < n) tail(i, n);
}

// ---- 16- and 8-bit formats and F32: one fused kernel per (source, destination) pair ----
// Each format provides Widen (load N elements, exact conversion to f32 bits in i32 lanes), Narrow
// (f32 bits -> N elements, rounding as the scalar reference) and the scalar reference per element
// for tails. Pairs of two narrow formats (e.g. BF16 -> F16) are converted in registers through f32,
// which is bit-identical to widening to an F32 buffer and narrowing it, without the extra pass.

// `shifted` = f16 exponent and mantissa (no sign) moved to their f32 positions (<< 13); returns
// the f32 bits without sign. (Comparisons are done on this 28-bit value rather than on the 15-bit
// one, which clang would narrow to slow i16x8 compares for WASM.)
HWY_INLINE VI F16MagnitudeToF32Bits(VI shifted) {
  const DF df;
  const DI di;
  const auto is_inf_nan = hn::Gt(shifted, hn::Set(di, 0x0F7FFFFF));
  const auto is_nan = hn::Gt(shifted, hn::Set(di, 0x0F800000));
  // Normal: rebias by 112 << 23; Inf/NaN: exponent 0x1F -> 0xFF by adding 0xE0 << 23.
  VI normal = hn::Add(shifted, hn::IfThenElse(is_inf_nan, hn::Set(di, 0x70000000), hn::Set(di, 0x38000000)));
  normal = hn::Or(normal, hn::IfThenElseZero(is_nan, hn::Set(di, 0x00400000)));  // quiet NaN
  // Subnormal (and zero): m * 2^-24 = (2^-14 with mantissa m << 13) - 2^-14, exact (c10's trick
  // in another scale; no int->float conversion, which clang scalarises for WASM).
  const VI sub = hn::BitCast(
      di, hn::Sub(hn::BitCast(df, hn::Or(shifted, hn::Set(di, 0x38800000))), hn::Set(df, 6.103515625e-05f)));
  const auto is_sub = hn::Lt(shifted, hn::Set(di, 0x00800000));
  return hn::IfThenElse(is_sub, sub, normal);
}

// f16 bits (zero-extended in i32 lanes) -> f32 bits. Same rules as scalar::F16ToF32Bits.
HWY_INLINE VI F16BitsToF32Bits(VI h) {
  const DI di;
  const VI sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(di, 0x8000)));
  return hn::Or(F16MagnitudeToF32Bits(hn::ShiftLeft<13>(hn::And(h, hn::Set(di, 0x7FFF)))), sign);
}

struct FmtF32 {
  using T = float;
  using Bits = uint32_t;
  using D = DF;
  static HWY_INLINE VI Widen(const T* HWY_RESTRICT p) { return hn::BitCast(DI(), hn::LoadU(DF(), p)); }
  static HWY_INLINE hn::Vec<D> Narrow(VI w) { return hn::BitCast(DF(), w); }
  static uint32_t ToF32(Bits b) { return b; }
  static Bits FromF32(uint32_t w) { return w; }
};

struct FmtBF16 {
  using T = uint16_t;
  using Bits = uint16_t;
  using D = D16;
  static HWY_INLINE VI Widen(const T* HWY_RESTRICT p) {
    return hn::BitCast(DI(), hn::ShiftLeft<16>(hn::PromoteTo(DU(), hn::LoadU(D16(), p))));
  }
  static HWY_INLINE hn::Vec<D> Narrow(VI w) {
    const DI di;
    const DU du;
    const auto u = hn::BitCast(du, w);
    const auto bias = hn::Add(hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)), hn::Set(du, 0x7FFFu));
    VI r = hn::BitCast(di, hn::ShiftRight<16>(hn::Add(u, bias)));
    const auto is_nan = hn::Gt(hn::And(w, hn::Set(di, 0x7FFFFFFF)), hn::Set(di, 0x7F800000));
    r = hn::IfThenElse(is_nan, hn::Set(di, 0x7FC0), r);
    return hn::DemoteTo(D16(), r);
  }
  static uint32_t ToF32(Bits b) { return scalar::BF16ToF32Bits(b); }
  static Bits FromF32(uint32_t w) { return scalar::F32BitsToBF16(w); }
};

struct FmtF16 {
  using T = uint16_t;
  using Bits = uint16_t;
  using D = D16;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  // F16C (vcvtph2ps / vcvtps2ph with round-to-nearest-even immediate). Checked exhaustively (all
  // 2^16 and 2^32 inputs) to equal the scalar reference once NaNs are canonicalised before
  // narrowing: vcvtph2ps quiets signalling NaNs and keeps the payload, exactly like c10.
  static HWY_INLINE VI Widen(const T* HWY_RESTRICT p) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::BitCast(DI(), hn::PromoteTo(DF(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p))));
  }
  static HWY_INLINE hn::Vec<D> Narrow(VI w) {
    const DF df;
    const DI di;
    const hn::Rebind<hwy::float16_t, DF> dh;
    // NaN -> sign | 0x7FC00000, which vcvtps2ph turns into sign | 0x7E00.
    const VI qnan = hn::Or(hn::And(w, hn::Set(di, static_cast<int32_t>(0x80000000u))), hn::Set(di, 0x7FC00000));
    const auto v = hn::BitCast(df, w);
    const VI fixed = hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(v)), qnan, w);
    return hn::BitCast(D16(), hn::DemoteTo(dh, hn::BitCast(df, fixed)));
  }
#else
  static HWY_INLINE VI Widen(const T* HWY_RESTRICT p) {
    return F16BitsToF32Bits(hn::BitCast(DI(), hn::PromoteTo(DU(), hn::LoadU(D16(), p))));
  }
  static HWY_INLINE hn::Vec<D> Narrow(VI w) {
    const DF df;
    const DI di;
    const VI sign = hn::And(hn::ShiftRight<16>(w), hn::Set(di, 0x8000));
    const VI a = hn::And(w, hn::Set(di, 0x7FFFFFFF));
    // Normal result: rebias, round to nearest even on the 13 dropped bits.
    const VI odd = hn::And(hn::ShiftRight<13>(a), hn::Set(di, 1));
    const VI norm = hn::ShiftRight<13>(hn::Add(hn::Add(a, hn::Set(di, 0xFFF - 0x38000000)), odd));
    // Subnormal result: |x| + 0.5f rounds (RNE) to a multiple of 2^-24.
    const VI sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, 0.5f))), hn::Set(di, 0x3F000000));
    VI r = hn::IfThenElse(hn::Lt(a, hn::Set(di, 0x38800000)), sub, norm);
    r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x477FEFFF)), hn::Set(di, 0x7C00), r);  // >= 65520
    r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7F800000)), hn::Set(di, 0x7E00), r);  // NaN
    return hn::DemoteTo(D16(), hn::Or(r, sign));
  }
#endif
  static uint32_t ToF32(Bits b) { return scalar::F16ToF32Bits(b); }
  static Bits FromF32(uint32_t w) { return scalar::F32BitsToF16(w); }
};

struct FmtE4M3 {
  using T = uint8_t;
  using Bits = uint8_t;
  using D = D8;
  static HWY_INLINE VI Widen(const T* HWY_RESTRICT p) {
    const DF df;
    const DI di;
    const VI b = hn::BitCast(di, hn::PromoteTo(DU(), hn::LoadU(D8(), p)));
    const VI sign = hn::ShiftLeft<24>(hn::And(b, hn::Set(di, 0x80)));
    const VI em = hn::And(b, hn::Set(di, 0x7F));
    VI normal = hn::Add(hn::ShiftLeft<20>(em), hn::Set(di, 120 << 23));
    normal = hn::IfThenElse(hn::Eq(em, hn::Set(di, 0x7F)), hn::Set(di, 0x7FF00000), normal);
    // Subnormal (and zero): em * 2^-9 = (2^14 with mantissa em) - 2^14, exact.
    const VI sub = hn::BitCast(di, hn::Sub(hn::BitCast(df, hn::Or(em, hn::Set(di, 141 << 23))), hn::Set(df, 16384.0f)));
    return hn::Or(hn::IfThenElse(hn::Lt(em, hn::Set(di, 8)), sub, normal), sign);
  }
  // f32 bits -> e4m3fn byte value in i32 lanes.
  static HWY_INLINE VI NarrowI32(VI w) {
    const DF df;
    const DI di;
    const VI sign = hn::And(hn::ShiftRight<24>(w), hn::Set(di, 0x80));
    const VI a = hn::And(w, hn::Set(di, 0x7FFFFFFF));
    // Normal result: rebias, RNE on the 20 dropped bits. For |x| >= 480 (incl. Inf/NaN) this is
    // >= 0x7F, so Min gives the NaN code 0x7F as c10 does.
    const VI odd = hn::And(hn::ShiftRight<20>(a), hn::Set(di, 1));
    const VI norm =
        hn::Min(hn::ShiftRight<20>(hn::Add(hn::Add(a, hn::Set(di, 0x7FFFF - (120 << 23))), odd)), hn::Set(di, 0x7F));
    // Subnormal result: |x| + 2^14 rounds (RNE) to a multiple of 2^-9.
    const VI sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, 16384.0f))), hn::Set(di, 141 << 23));
    return hn::Or(hn::IfThenElse(hn::Lt(a, hn::Set(di, 121 << 23)), sub, norm), sign);
  }
  static HWY_INLINE hn::Vec<D> Narrow(VI w) { return hn::DemoteTo(D8(), NarrowI32(w)); }
  static uint32_t ToF32(Bits b) { return scalar::F8E4M3ToF32Bits(b); }
  static Bits FromF32(uint32_t w) { return scalar::F32BitsToF8E4M3(w); }
};

struct FmtE5M2 {
  using T = uint8_t;
  using Bits = uint8_t;
  using D = D8;
  static HWY_INLINE VI Widen(const T* HWY_RESTRICT p) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
    // e5m2 is the top byte of an f16: widen (b << 8) with F16C, as FmtF16 does.
    const auto h = hn::ShiftLeft<8>(hn::PromoteTo(D16(), hn::LoadU(D8(), p)));
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::BitCast(DI(), hn::PromoteTo(DF(), hn::BitCast(dh, h)));
#else
    const DI di;
    const VI b = hn::BitCast(di, hn::PromoteTo(DU(), hn::LoadU(D8(), p)));
    const VI sign = hn::ShiftLeft<24>(hn::And(b, hn::Set(di, 0x80)));
    return hn::Or(F16MagnitudeToF32Bits(hn::ShiftLeft<21>(hn::And(b, hn::Set(di, 0x7F)))), sign);
#endif
  }
  // f32 bits -> e5m2 byte value in i32 lanes.
  static HWY_INLINE VI NarrowI32(VI w) {
    const DF df;
    const DI di;
    const VI sign = hn::And(hn::ShiftRight<24>(w), hn::Set(di, 0x80));
    const VI a = hn::And(w, hn::Set(di, 0x7FFFFFFF));
    // Normal result: rebias, RNE on the 21 dropped bits; |x| >= 65536 and Inf give >= 0x7C, so
    // Min makes them Inf. NaN -> 0x7F below.
    const VI odd = hn::And(hn::ShiftRight<21>(a), hn::Set(di, 1));
    const VI norm =
        hn::Min(hn::ShiftRight<21>(hn::Add(hn::Add(a, hn::Set(di, 0xFFFFF - (112 << 23))), odd)), hn::Set(di, 0x7C));
    // Subnormal result: |x| + 2^7 rounds (RNE) to a multiple of 2^-16.
    const VI sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, 128.0f))), hn::Set(di, 134 << 23));
    VI r = hn::IfThenElse(hn::Lt(a, hn::Set(di, 113 << 23)), sub, norm);
    r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7F800000)), hn::Set(di, 0x7F), r);  // NaN
    return hn::Or(r, sign);
  }
  static HWY_INLINE hn::Vec<D> Narrow(VI w) { return hn::DemoteTo(D8(), NarrowI32(w)); }
  static uint32_t ToF32(Bits b) { return scalar::F8E5M2ToF32Bits(b); }
  static Bits FromF32(uint32_t w) { return scalar::F32BitsToF8E5M2(w); }
};

// Stores 4 vectors of i32 lanes holding byte values (0..255) as 4 * Lanes(DF) consecutive bytes.
// On AVX2 two packs, one pack and one permute do what four DemoteTo calls would, and the 32-byte
// result can be streamed.
HWY_INLINE void StoreBytes4(VI r0, VI r1, VI r2, VI r3, uint8_t* HWY_RESTRICT out, bool stream) {
#if HWY_TARGET == HWY_AVX2
  const __m256i p01 = _mm256_packs_epi32(r0.raw, r1.raw);  // lanes: r0[0:4] r1[0:4] | r0[4:8] r1[4:8]
  const __m256i p23 = _mm256_packs_epi32(r2.raw, r3.raw);
  const __m256i b = _mm256_packus_epi16(p01, p23);  // dwords: r0lo r1lo r2lo r3lo r0hi r1hi ...
  const __m256i v = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  if (stream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out), v);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), v);
  }
#else
  (void)stream;
  const D8 d8;
  const size_t N = hn::Lanes(d8);
  hn::StoreU(hn::DemoteTo(d8, r0), d8, out);
  hn::StoreU(hn::DemoteTo(d8, r1), d8, out + N);
  hn::StoreU(hn::DemoteTo(d8, r2), d8, out + 2 * N);
  hn::StoreU(hn::DemoteTo(d8, r3), d8, out + 3 * N);
#endif
}

template <class Src, class Dst>
void ConvertPair(const void* HWY_RESTRICT in, void* HWY_RESTRICT out, size_t n, bool stream) {
  const auto* HWY_RESTRICT src = static_cast<const typename Src::T*>(in);
  auto* HWY_RESTRICT dst = static_cast<typename Dst::T*>(out);
  const auto tail = [&](size_t b, size_t e) {
    for (size_t j = b; j < e; ++j) {
      const auto x = scalar::LoadAt<typename Src::Bits>(in, j);
      scalar::StoreAt<typename Dst::Bits>(out, j, Dst::FromF32(Src::ToF32(x)));
    }
  };
  const size_t N = hn::Lanes(DF());
  if constexpr (sizeof(typename Dst::T) == 1) {
    // 8-bit outputs: four input vectors per step (see StoreBytes4).
#if HWY_TARGET == HWY_AVX2
    const size_t out_bytes = 4 * N;
#else
    const size_t out_bytes = 0;  // never streamed
#endif
    Loop(
        n, 4 * N, dst, out_bytes, stream,
        [&](size_t i, bool s) PB_INLINE_LAMBDA {
          const VI r0 = Dst::NarrowI32(Src::Widen(src + i));
          const VI r1 = Dst::NarrowI32(Src::Widen(src + i + N));
          const VI r2 = Dst::NarrowI32(Src::Widen(src + i + 2 * N));
          const VI r3 = Dst::NarrowI32(Src::Widen(src + i + 3 * N));
          StoreBytes4(r0, r1, r2, r3, dst + i, s);
        },
        tail);
  } else {
    const typename Dst::D d_out;
    Loop(
        n, N, dst, N * sizeof(typename Dst::T), stream,
        [&](size_t i, bool s) PB_INLINE_LAMBDA { StoreOut(Dst::Narrow(Src::Widen(src + i)), d_out, dst + i, s); },
        tail);
  }
}

using PairFn = void (*)(const void*, void*, size_t, bool);

template <class Src>
PairFn PickDst(int dst) {
  switch (dst) {
    case kFmtF32: return &ConvertPair<Src, FmtF32>;
    case kFmtBF16: return &ConvertPair<Src, FmtBF16>;
    case kFmtF16: return &ConvertPair<Src, FmtF16>;
    case kFmtE4M3: return &ConvertPair<Src, FmtE4M3>;
    default: return &ConvertPair<Src, FmtE5M2>;
  }
}

// Converts between two of {F32, BF16, F16, F8_E4M3, F8_E5M2} (format codes kFmt*).
void ConvertPairImpl(int src, int dst, const void* HWY_RESTRICT in, void* HWY_RESTRICT out, size_t n, bool stream) {
  PairFn fn;
  switch (src) {
    case kFmtF32: fn = PickDst<FmtF32>(dst); break;
    case kFmtBF16: fn = PickDst<FmtBF16>(dst); break;
    case kFmtF16: fn = PickDst<FmtF16>(dst); break;
    case kFmtE4M3: fn = PickDst<FmtE4M3>(dst); break;
    default: fn = PickDst<FmtE5M2>(dst); break;
  }
  fn(in, out, n, stream);
}

// ---- F64 <-> F32 ----
// Hardware conversion (IEEE RNE, exact widening) for vectors without NaN; a vector containing a NaN
// goes through the scalar reference so NaN bits are fixed on every target. Highway's HWY_SCALAR
// DemoteTo clamps to FLT_MAX instead of overflowing to Inf, so that target uses the scalar code.

#if HWY_TARGET == HWY_WASM
// Highway 1.0.3 has no f64 vectors on WASM: use the SIMD128 intrinsics directly.
void F64ToF32Impl(const double* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n, bool) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const v128_t a = wasm_v128_load(in + i);
    const v128_t b = wasm_v128_load(in + i + 2);
    if (wasm_v128_any_true(wasm_v128_or(wasm_f64x2_ne(a, a), wasm_f64x2_ne(b, b)))) {
      scalar::F64ToF32(in + i, out + i, 4);
      continue;
    }
    const v128_t fa = wasm_f32x4_demote_f64x2_zero(a);
    const v128_t fb = wasm_f32x4_demote_f64x2_zero(b);
    wasm_v128_store(out + i, wasm_i32x4_shuffle(fa, fb, 0, 1, 4, 5));
  }
  if (i < n) scalar::F64ToF32(in + i, out + i, n - i);
}

void F32ToF64Impl(const float* HWY_RESTRICT in, double* HWY_RESTRICT out, size_t n, bool) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const v128_t v = wasm_v128_load(in + i);
    if (wasm_v128_any_true(wasm_f32x4_ne(v, v))) {
      scalar::F32ToF64(in + i, out + i, 4);
      continue;
    }
    wasm_v128_store(out + i, wasm_f64x2_promote_low_f32x4(v));
    wasm_v128_store(out + i + 2, wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(v, v, 2, 3, 2, 3)));
  }
  if (i < n) scalar::F32ToF64(in + i, out + i, n - i);
}

#elif HWY_HAVE_FLOAT64 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128

void F64ToF32Impl(const double* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n, bool stream) {
  const hn::ScalableTag<double> d64;
  const hn::Rebind<float, decltype(d64)> d32;
  const size_t N = hn::Lanes(d64);
  Loop(
      n, N, out, N * sizeof(float), stream,
      [&](size_t i, bool s) PB_INLINE_LAMBDA {
        const auto v = hn::LoadU(d64, in + i);
        if (HWY_UNLIKELY(!hn::AllFalse(d64, hn::IsNaN(v)))) {
          scalar::F64ToF32(in + i, out + i, N);
          return;
        }
        StoreOut(hn::DemoteTo(d32, v), d32, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F64ToF32(in + b, out + b, e - b); });
}

void F32ToF64Impl(const float* HWY_RESTRICT in, double* HWY_RESTRICT out, size_t n, bool stream) {
  const hn::ScalableTag<double> d64;
  const hn::Rebind<float, decltype(d64)> d32;
  const size_t N = hn::Lanes(d64);
  Loop(
      n, N, out, N * sizeof(double), stream,
      [&](size_t i, bool s) PB_INLINE_LAMBDA {
        const auto v = hn::LoadU(d32, in + i);
        if (HWY_UNLIKELY(!hn::AllFalse(d32, hn::IsNaN(v)))) {
          scalar::F32ToF64(in + i, out + i, N);
          return;
        }
        StoreOut(hn::PromoteTo(d64, v), d64, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F32ToF64(in + b, out + b, e - b); });
}

#else

void F64ToF32Impl(const double* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n, bool) {
  scalar::F64ToF32(in, out, n);
}
void F32ToF64Impl(const float* HWY_RESTRICT in, double* HWY_RESTRICT out, size_t n, bool) {
  scalar::F32ToF64(in, out, n);
}

#endif

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace pb::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pb::kernels {

#ifdef PB_STATIC_DISPATCH
#define PB_CALL(fn) HWY_STATIC_DISPATCH(fn)
#else
HWY_EXPORT(ConvertPairImpl);
HWY_EXPORT(F64ToF32Impl);
HWY_EXPORT(F32ToF64Impl);
HWY_EXPORT(TargetNameImpl);
#define PB_CALL(fn) HWY_DYNAMIC_DISPATCH(fn)
#endif

namespace {

// Outputs at least this large use streaming stores natively (Stream is a plain store in WASM).
// Smaller outputs are probably wanted in the cache by the caller.
constexpr size_t kStreamBytes = size_t{4} << 20;
constexpr size_t kBlock = 4096;  // elements per F32 staging block for F64 <-> narrow pairs

bool Stream(size_t n, size_t out_elem_bytes) { return n * out_elem_bytes >= kStreamBytes; }

// Format code for the pair kernel, or -1 for F64 / unsupported.
int FmtOf(Dtype t) {
  switch (t) {
    case Dtype::F32: return kFmtF32;
    case Dtype::BF16: return kFmtBF16;
    case Dtype::F16: return kFmtF16;
    case Dtype::F8_E4M3: return kFmtE4M3;
    case Dtype::F8_E5M2: return kFmtE5M2;
    default: return -1;
  }
}

void Pair(int src, int dst, const void* in, void* out, size_t n, size_t out_elem_bytes) {
  PB_CALL(ConvertPairImpl)(src, dst, in, out, n, Stream(n, out_elem_bytes));
}

}  // namespace

void BF16ToF32(const uint16_t* in, float* out, size_t n) { Pair(kFmtBF16, kFmtF32, in, out, n, 4); }
void F32ToBF16(const float* in, uint16_t* out, size_t n) { Pair(kFmtF32, kFmtBF16, in, out, n, 2); }
void F16ToF32(const uint16_t* in, float* out, size_t n) { Pair(kFmtF16, kFmtF32, in, out, n, 4); }
void F32ToF16(const float* in, uint16_t* out, size_t n) { Pair(kFmtF32, kFmtF16, in, out, n, 2); }
void F8E4M3ToF32(const uint8_t* in, float* out, size_t n) { Pair(kFmtE4M3, kFmtF32, in, out, n, 4); }
void F32ToF8E4M3(const float* in, uint8_t* out, size_t n) { Pair(kFmtF32, kFmtE4M3, in, out, n, 1); }
void F8E5M2ToF32(const uint8_t* in, float* out, size_t n) { Pair(kFmtE5M2, kFmtF32, in, out, n, 4); }
void F32ToF8E5M2(const float* in, uint8_t* out, size_t n) { Pair(kFmtF32, kFmtE5M2, in, out, n, 1); }
void F64ToF32(const double* in, float* out, size_t n) { PB_CALL(F64ToF32Impl)(in, out, n, Stream(n, 4)); }
void F32ToF64(const float* in, double* out, size_t n) { PB_CALL(F32ToF64Impl)(in, out, n, Stream(n, 8)); }

const char* KernelTargetName() { return PB_CALL(TargetNameImpl)(); }

bool CanConvert(Dtype from, Dtype to) { return from == to || (IsConvertibleFloat(from) && IsConvertibleFloat(to)); }

bool ConvertElements(Dtype from, Dtype to, const void* in, void* out, size_t n) {
  if (!CanConvert(from, to)) return false;
  if (n == 0) return true;
  if (from == to) {
    std::memmove(out, in, (n * DtypeBits(from) + 7) / 8);
    return true;
  }
  const size_t out_elem = DtypeBits(to) / 8;
  const int src = FmtOf(from);
  const int dst = FmtOf(to);
  if (src >= 0 && dst >= 0) {  // no F64 involved: one fused pass
    Pair(src, dst, in, out, n, out_elem);
    return true;
  }
  if (from == Dtype::F64 && to == Dtype::F32) {
    F64ToF32(static_cast<const double*>(in), static_cast<float*>(out), n);
    return true;
  }
  if (from == Dtype::F32 && to == Dtype::F64) {
    F32ToF64(static_cast<const float*>(in), static_cast<double*>(out), n);
    return true;
  }
  // F64 <-> a narrow format: through F32 in cache-resident blocks. F64 -> narrow rounds twice
  // (to F32, then to the target), exactly as torch's Half(float(double)) / BFloat16(float(double)).
  const bool stream = Stream(n, out_elem);
  alignas(64) float buf[kBlock];
  const auto* s = static_cast<const unsigned char*>(in);
  auto* d = static_cast<unsigned char*>(out);
  const size_t in_elem = DtypeBits(from) / 8;
  for (size_t done = 0; done < n; done += kBlock) {
    const size_t m = n - done < kBlock ? n - done : kBlock;
    const unsigned char* bs = s + done * in_elem;
    unsigned char* bd = d + done * out_elem;
    if (from == Dtype::F64) {
      PB_CALL(F64ToF32Impl)(reinterpret_cast<const double*>(bs), buf, m, false);
      PB_CALL(ConvertPairImpl)(kFmtF32, dst, buf, bd, m, stream);
    } else {
      PB_CALL(ConvertPairImpl)(src, kFmtF32, bs, buf, m, false);
      PB_CALL(F32ToF64Impl)(buf, reinterpret_cast<double*>(bd), m, stream);
    }
  }
  return true;
}

}  // namespace pb::kernels
#endif  // HWY_ONCE
