// Highway kernels for the dtype conversions declared in convert.h.
//
// The exact semantics (including NaN bit patterns) are defined by the scalar reference in
// convert_scalar.h; every kernel here reproduces them bit for bit on every target. We never rely on
// Highway's f16/bf16 PromoteTo/DemoteTo (1.0.3 truncates to bf16, and its WASM f16 path is emulated
// and wrong on Inf/NaN), nor on F16C (which would also be correct for f16->f32 NaNs, but the integer
// kernel is just as fast at memory speed and identical everywhere). Floating-point arithmetic is
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
HWY_INLINE void Loop(size_t n, size_t lanes, const TOut* out, size_t out_vec_bytes, bool stream,
                     const VecFn& vec, const TailFn& tail) {
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

// ---- 16-bit formats ----

// f16 bits (zero-extended in i32 lanes) -> f32 bits. Same rules as scalar::F16ToF32Bits.
HWY_INLINE VI F16BitsToF32Bits(DI di, VI h) {
  const DF df;
  const VI sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(di, 0x8000)));
  const VI em = hn::And(h, hn::Set(di, 0x7FFF));
  const VI shifted = hn::ShiftLeft<13>(em);
  const auto is_inf_nan = hn::Gt(em, hn::Set(di, 0x7BFF));
  const auto is_nan = hn::Gt(em, hn::Set(di, 0x7C00));
  // Normal: rebias by 112 << 23; Inf/NaN: exponent 0x1F -> 0xFF by adding 0xE0 << 23.
  VI normal = hn::Add(shifted, hn::IfThenElse(is_inf_nan, hn::Set(di, 0x70000000),
                                              hn::Set(di, 0x38000000)));
  normal = hn::Or(normal, hn::IfThenElseZero(is_nan, hn::Set(di, 0x00400000)));  // quiet NaN
  // Subnormal (and zero): em * 2^-24, exact in f32.
  const VI sub = hn::BitCast(di, hn::Mul(hn::ConvertTo(df, em), hn::Set(df, 5.9604644775390625e-8f)));
  const auto is_sub = hn::Lt(em, hn::Set(di, 0x0400));
  return hn::Or(hn::IfThenElse(is_sub, sub, normal), sign);
}

void BF16ToF32Impl(const uint16_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n,
                   bool stream) {
  const DF df;
  const DU du;
  const D16 d16;
  const size_t N = hn::Lanes(df);
  Loop(
      n, N, out, N * sizeof(float), stream,
      [&](size_t i, bool s) {
        const auto v = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, in + i)));
        StoreOut(hn::BitCast(df, v), df, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::BF16ToF32(in + b, out + b, e - b); });
}

void F32ToBF16Impl(const float* HWY_RESTRICT in, uint16_t* HWY_RESTRICT out, size_t n,
                   bool stream) {
  const DF df;
  const DU du;
  const DI di;
  const D16 d16;
  const size_t N = hn::Lanes(df);
  Loop(
      n, N, out, N * sizeof(uint16_t), stream,
      [&](size_t i, bool s) {
        const auto v = hn::LoadU(df, in + i);
        const auto u = hn::BitCast(du, v);
        const auto bias = hn::Add(hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)), hn::Set(du, 0x7FFFu));
        auto r = hn::BitCast(di, hn::ShiftRight<16>(hn::Add(u, bias)));
        r = hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(v)), hn::Set(di, 0x7FC0), r);
        StoreOut(hn::DemoteTo(d16, r), d16, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F32ToBF16(in + b, out + b, e - b); });
}

void F16ToF32Impl(const uint16_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n,
                  bool stream) {
  const DF df;
  const DI di;
  const DU du;
  const D16 d16;
  const size_t N = hn::Lanes(df);
  Loop(
      n, N, out, N * sizeof(float), stream,
      [&](size_t i, bool s) {
        const VI h = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d16, in + i)));
        StoreOut(hn::BitCast(df, F16BitsToF32Bits(di, h)), df, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F16ToF32(in + b, out + b, e - b); });
}

void F32ToF16Impl(const float* HWY_RESTRICT in, uint16_t* HWY_RESTRICT out, size_t n,
                  bool stream) {
  const DF df;
  const DI di;
  const D16 d16;
  const size_t N = hn::Lanes(df);
  Loop(
      n, N, out, N * sizeof(uint16_t), stream,
      [&](size_t i, bool s) {
        const VI w = hn::BitCast(di, hn::LoadU(df, in + i));
        const VI sign = hn::And(hn::ShiftRight<16>(w), hn::Set(di, 0x8000));
        const VI a = hn::And(w, hn::Set(di, 0x7FFFFFFF));
        // Normal result: rebias, round to nearest even on the 13 dropped bits.
        const VI odd = hn::And(hn::ShiftRight<13>(a), hn::Set(di, 1));
        const VI norm = hn::ShiftRight<13>(
            hn::Add(hn::Add(a, hn::Set(di, 0xFFF - 0x38000000)), odd));
        // Subnormal result: |x| + 0.5f rounds (RNE) to a multiple of 2^-24.
        const VI sub = hn::Sub(
            hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, 0.5f))), hn::Set(di, 0x3F000000));
        VI r = hn::IfThenElse(hn::Lt(a, hn::Set(di, 0x38800000)), sub, norm);
        r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x477FEFFF)), hn::Set(di, 0x7C00), r);
        r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7F800000)), hn::Set(di, 0x7E00), r);
        StoreOut(hn::DemoteTo(d16, hn::Or(r, sign)), d16, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F32ToF16(in + b, out + b, e - b); });
}

// ---- 8-bit formats ----

void F8E4M3ToF32Impl(const uint8_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n,
                     bool stream) {
  const DF df;
  const DI di;
  const DU du;
  const D8 d8;
  const size_t N = hn::Lanes(df);
  Loop(
      n, N, out, N * sizeof(float), stream,
      [&](size_t i, bool s) {
        const VI b = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, in + i)));
        const VI sign = hn::ShiftLeft<24>(hn::And(b, hn::Set(di, 0x80)));
        const VI em = hn::And(b, hn::Set(di, 0x7F));
        VI normal = hn::Add(hn::ShiftLeft<20>(em), hn::Set(di, 120 << 23));
        normal = hn::IfThenElse(hn::Eq(em, hn::Set(di, 0x7F)), hn::Set(di, 0x7FF00000), normal);
        const VI sub = hn::BitCast(di, hn::Mul(hn::ConvertTo(df, em), hn::Set(df, 0.001953125f)));
        const VI r = hn::Or(hn::IfThenElse(hn::Lt(em, hn::Set(di, 8)), sub, normal), sign);
        StoreOut(hn::BitCast(df, r), df, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F8E4M3ToF32(in + b, out + b, e - b); });
}

void F32ToF8E4M3Impl(const float* HWY_RESTRICT in, uint8_t* HWY_RESTRICT out, size_t n,
                     bool stream) {
  const DF df;
  const DI di;
  const D8 d8;
  const size_t N = hn::Lanes(df);
  Loop(
      n, N, out, N, stream,
      [&](size_t i, bool s) {
        const VI w = hn::BitCast(di, hn::LoadU(df, in + i));
        const VI sign = hn::And(hn::ShiftRight<24>(w), hn::Set(di, 0x80));
        const VI a = hn::And(w, hn::Set(di, 0x7FFFFFFF));
        const VI odd = hn::And(hn::ShiftRight<20>(a), hn::Set(di, 1));
        const VI norm = hn::ShiftRight<20>(
            hn::Add(hn::Add(a, hn::Set(di, 0x7FFFF - (120 << 23))), odd));
        // Subnormal result: |x| + 2^14 rounds (RNE) to a multiple of 2^-9.
        const VI sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, 16384.0f))),
                               hn::Set(di, 141 << 23));
        VI r = hn::IfThenElse(hn::Lt(a, hn::Set(di, 121 << 23)), sub, norm);
        r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x43EFFFFF)), hn::Set(di, 0x7F), r);
        StoreOut(hn::DemoteTo(d8, hn::Or(r, sign)), d8, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F32ToF8E4M3(in + b, out + b, e - b); });
}

void F8E5M2ToF32Impl(const uint8_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n,
                     bool stream) {
  const DF df;
  const DI di;
  const DU du;
  const D8 d8;
  const size_t N = hn::Lanes(df);
  Loop(
      n, N, out, N * sizeof(float), stream,
      [&](size_t i, bool s) {
        const VI h = hn::ShiftLeft<8>(hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, in + i))));
        StoreOut(hn::BitCast(df, F16BitsToF32Bits(di, h)), df, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F8E5M2ToF32(in + b, out + b, e - b); });
}

void F32ToF8E5M2Impl(const float* HWY_RESTRICT in, uint8_t* HWY_RESTRICT out, size_t n,
                     bool stream) {
  const DF df;
  const DI di;
  const D8 d8;
  const size_t N = hn::Lanes(df);
  Loop(
      n, N, out, N, stream,
      [&](size_t i, bool s) {
        const VI w = hn::BitCast(di, hn::LoadU(df, in + i));
        const VI sign = hn::And(hn::ShiftRight<24>(w), hn::Set(di, 0x80));
        const VI a = hn::And(w, hn::Set(di, 0x7FFFFFFF));
        const VI odd = hn::And(hn::ShiftRight<21>(a), hn::Set(di, 1));
        const VI norm = hn::ShiftRight<21>(
            hn::Add(hn::Add(a, hn::Set(di, 0xFFFFF - (112 << 23))), odd));
        // Subnormal result: |x| + 2^7 rounds (RNE) to a multiple of 2^-16.
        const VI sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, 128.0f))),
                               hn::Set(di, 134 << 23));
        VI r = hn::IfThenElse(hn::Lt(a, hn::Set(di, 113 << 23)), sub, norm);
        const VI big = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7F800000)), hn::Set(di, 0x7F),
                                      hn::Set(di, 0x7C));
        r = hn::IfThenElse(hn::Gt(a, hn::Set(di, (143 << 23) - 1)), big, r);
        StoreOut(hn::DemoteTo(d8, hn::Or(r, sign)), d8, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F32ToF8E5M2(in + b, out + b, e - b); });
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

void F64ToF32Impl(const double* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n,
                  bool stream) {
  const hn::ScalableTag<double> d64;
  const hn::Rebind<float, decltype(d64)> d32;
  const size_t N = hn::Lanes(d64);
  Loop(
      n, N, out, N * sizeof(float), stream,
      [&](size_t i, bool s) {
        const auto v = hn::LoadU(d64, in + i);
        if (HWY_UNLIKELY(!hn::AllFalse(d64, hn::IsNaN(v)))) {
          scalar::F64ToF32(in + i, out + i, N);
          return;
        }
        StoreOut(hn::DemoteTo(d32, v), d32, out + i, s);
      },
      [&](size_t b, size_t e) { scalar::F64ToF32(in + b, out + b, e - b); });
}

void F32ToF64Impl(const float* HWY_RESTRICT in, double* HWY_RESTRICT out, size_t n,
                  bool stream) {
  const hn::ScalableTag<double> d64;
  const hn::Rebind<float, decltype(d64)> d32;
  const size_t N = hn::Lanes(d64);
  Loop(
      n, N, out, N * sizeof(double), stream,
      [&](size_t i, bool s) {
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
HWY_EXPORT(BF16ToF32Impl);
HWY_EXPORT(F32ToBF16Impl);
HWY_EXPORT(F16ToF32Impl);
HWY_EXPORT(F32ToF16Impl);
HWY_EXPORT(F8E4M3ToF32Impl);
HWY_EXPORT(F32ToF8E4M3Impl);
HWY_EXPORT(F8E5M2ToF32Impl);
HWY_EXPORT(F32ToF8E5M2Impl);
HWY_EXPORT(F64ToF32Impl);
HWY_EXPORT(F32ToF64Impl);
HWY_EXPORT(TargetNameImpl);
#define PB_CALL(fn) HWY_DYNAMIC_DISPATCH(fn)
#endif

namespace {

// Outputs at least this large use streaming stores (natively; a no-op distinction in WASM). Below
// it the result is likely still wanted in the cache by the caller.
constexpr size_t kStreamBytes = size_t{4} << 20;
constexpr size_t kBlock = 4096;  // elements per F32 staging block in ConvertElements

bool Stream(size_t n, size_t out_elem_bytes) { return n * out_elem_bytes >= kStreamBytes; }

size_t ElemBytes(Dtype t) { return DtypeBits(t) / 8; }

// from -> F32 (from != F32).
void ToF32(Dtype from, const void* in, float* out, size_t n, bool stream) {
  switch (from) {
    case Dtype::BF16: PB_CALL(BF16ToF32Impl)(static_cast<const uint16_t*>(in), out, n, stream); break;
    case Dtype::F16: PB_CALL(F16ToF32Impl)(static_cast<const uint16_t*>(in), out, n, stream); break;
    case Dtype::F8_E4M3: PB_CALL(F8E4M3ToF32Impl)(static_cast<const uint8_t*>(in), out, n, stream); break;
    case Dtype::F8_E5M2: PB_CALL(F8E5M2ToF32Impl)(static_cast<const uint8_t*>(in), out, n, stream); break;
    case Dtype::F64: PB_CALL(F64ToF32Impl)(static_cast<const double*>(in), out, n, stream); break;
    default: break;
  }
}

// F32 -> to (to != F32).
void FromF32(Dtype to, const float* in, void* out, size_t n, bool stream) {
  switch (to) {
    case Dtype::BF16: PB_CALL(F32ToBF16Impl)(in, static_cast<uint16_t*>(out), n, stream); break;
    case Dtype::F16: PB_CALL(F32ToF16Impl)(in, static_cast<uint16_t*>(out), n, stream); break;
    case Dtype::F8_E4M3: PB_CALL(F32ToF8E4M3Impl)(in, static_cast<uint8_t*>(out), n, stream); break;
    case Dtype::F8_E5M2: PB_CALL(F32ToF8E5M2Impl)(in, static_cast<uint8_t*>(out), n, stream); break;
    case Dtype::F64: PB_CALL(F32ToF64Impl)(in, static_cast<double*>(out), n, stream); break;
    default: break;
  }
}

}  // namespace

void BF16ToF32(const uint16_t* in, float* out, size_t n) {
  PB_CALL(BF16ToF32Impl)(in, out, n, Stream(n, 4));
}
void F32ToBF16(const float* in, uint16_t* out, size_t n) {
  PB_CALL(F32ToBF16Impl)(in, out, n, Stream(n, 2));
}
void F16ToF32(const uint16_t* in, float* out, size_t n) {
  PB_CALL(F16ToF32Impl)(in, out, n, Stream(n, 4));
}
void F32ToF16(const float* in, uint16_t* out, size_t n) {
  PB_CALL(F32ToF16Impl)(in, out, n, Stream(n, 2));
}
void F8E4M3ToF32(const uint8_t* in, float* out, size_t n) {
  PB_CALL(F8E4M3ToF32Impl)(in, out, n, Stream(n, 4));
}
void F32ToF8E4M3(const float* in, uint8_t* out, size_t n) {
  PB_CALL(F32ToF8E4M3Impl)(in, out, n, Stream(n, 1));
}
void F8E5M2ToF32(const uint8_t* in, float* out, size_t n) {
  PB_CALL(F8E5M2ToF32Impl)(in, out, n, Stream(n, 4));
}
void F32ToF8E5M2(const float* in, uint8_t* out, size_t n) {
  PB_CALL(F32ToF8E5M2Impl)(in, out, n, Stream(n, 1));
}
void F64ToF32(const double* in, float* out, size_t n) {
  PB_CALL(F64ToF32Impl)(in, out, n, Stream(n, 4));
}
void F32ToF64(const float* in, double* out, size_t n) {
  PB_CALL(F32ToF64Impl)(in, out, n, Stream(n, 8));
}

const char* KernelTargetName() { return PB_CALL(TargetNameImpl)(); }

bool CanConvert(Dtype from, Dtype to) {
  return from == to || (IsConvertibleFloat(from) && IsConvertibleFloat(to));
}

bool ConvertElements(Dtype from, Dtype to, const void* in, void* out, size_t n) {
  if (!CanConvert(from, to)) return false;
  if (n == 0) return true;
  if (from == to) {
    const size_t bytes = (n * DtypeBits(from) + 7) / 8;
    std::memmove(out, in, bytes);
    return true;
  }
  const bool stream = Stream(n, ElemBytes(to));
  if (from == Dtype::F32) {
    FromF32(to, static_cast<const float*>(in), out, n, stream);
    return true;
  }
  if (to == Dtype::F32) {
    ToF32(from, in, static_cast<float*>(out), n, stream);
    return true;
  }
  // Exact widening to F32 (or F64 -> F32 RNE, as torch's Half(float(double)) does), then one
  // rounding, in cache-resident blocks.
  alignas(64) float buf[kBlock];
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  const size_t in_bytes = ElemBytes(from);
  const size_t out_bytes = ElemBytes(to);
  for (size_t done = 0; done < n; done += kBlock) {
    const size_t m = n - done < kBlock ? n - done : kBlock;
    ToF32(from, src + done * in_bytes, buf, m, false);
    FromF32(to, buf, dst + done * out_bytes, m, stream);
  }
  return true;
}

}  // namespace pb::kernels
#endif  // HWY_ONCE
