// Scalar reference for the dtype conversion kernels: the bit-exact definition of their semantics.
//
// Every function here works on bit patterns with integer arithmetic only, so no floating-point
// operation whose NaN or rounding behaviour could differ between compilers, targets or the WASM
// engine is involved (and the reference stays independent of the hardware conversions that the SIMD
// kernels use). The SIMD kernels in convert.cc must match these bit for bit on every target;
// tests/native/convert_test.cc checks that. See docs/kernels.md.
//
// Rules (torch's scalar c10 conversions, CPU, x86):
//  - F32 -> BF16: c10::detail::round_to_nearest_even: RNE on the bits; every NaN -> 0x7FC0 (positive).
//  - F32 -> F16: c10::detail::fp16_ieee_from_fp32_value: RNE, |x| >= 65520 -> Inf, subnormals RNE,
//    NaN -> sign | 0x7E00.
//  - F16 -> F32: c10::detail::fp16_ieee_to_fp32_value: exact; NaN keeps sign and payload and gets the
//    quiet bit set (c10 multiplies by 2^-112, which quiets a signalling NaN; F16C does the same).
//  - BF16 -> F32: bits << 16, payload and signalling bit preserved.
//  - F8_E4M3 (e4m3fn): c10 fp8e4m3fn_{from,to}_fp32_value. Narrowing: |x| >= 480 (incl. Inf, NaN) ->
//    sign | 0x7F; otherwise RNE (so 464 < |x| < 480 also rounds to the NaN code, as in c10).
//    Widening: exact; NaN (S.1111.111) -> sign | 0x7FF00000.
//  - F8_E5M2: c10 fp8e5m2_{from,to}_fp32_value. Narrowing: NaN -> sign | 0x7F; |x| >= 65536 or Inf ->
//    sign | 0x7C (Inf); otherwise RNE (57344 < |x| < 65536 rounds to 57344 or Inf by RNE).
//    Widening = F16 -> F32 of (bits << 8).
//  - F64 -> F32: IEEE RNE (static_cast), overflow to Inf; NaN -> sign | 0x7FC00000 | (mantissa >> 29)
//    (what x86 cvtsd2ss produces; fixed here so WASM engines cannot differ).
//  - F32 -> F64: exact; NaN -> sign | 0x7FF8000000000000 | (mantissa << 29) (x86 cvtss2sd).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pb::kernels::scalar {

// std::bit_cast's job, by memcpy: Emscripten 3.1.6's libc++ has no std::bit_cast.
template <class To, class From>
inline To BitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}
inline uint32_t FloatBits(float f) { return BitCast<uint32_t>(f); }
inline float BitsFloat(uint32_t u) { return BitCast<float>(u); }
inline uint64_t DoubleBits(double d) { return BitCast<uint64_t>(d); }
inline double BitsDouble(uint64_t u) { return BitCast<double>(u); }

namespace detail {
// sig / 2^shift rounded to nearest, ties to even. shift in [1, 63].
inline uint64_t RneShiftRight(uint64_t sig, unsigned shift) {
  const uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
}
// A finite, nonzero-or-zero f32 magnitude `a` (sign cleared) expressed as an integer multiple of
// 2^-`unit_log2_neg`, rounded to nearest even. Used for results in a narrow format's subnormal range.
inline uint32_t F32MagnitudeToUnits(uint32_t a, unsigned unit_log2_neg) {
  const uint32_t e = a >> 23;
  const uint32_t sig = e ? ((a & 0x7FFFFFu) | 0x800000u) : (a & 0x7FFFFFu);
  const int32_t eff_e = e ? static_cast<int32_t>(e) : 1;
  // value = sig * 2^(eff_e - 150) = units * 2^-unit; units = sig * 2^(eff_e - 150 + unit).
  const int32_t shift = 150 - eff_e - static_cast<int32_t>(unit_log2_neg);
  if (shift <= 0) return sig << (-shift);  // not reached by callers (results are subnormal)
  if (shift > 25) return 0;                // sig < 2^24: value < 1/2 unit
  return static_cast<uint32_t>(RneShiftRight(sig, static_cast<unsigned>(shift)));
}
}  // namespace detail

// ---- 16-bit formats ----

inline uint32_t BF16ToF32Bits(uint16_t h) { return static_cast<uint32_t>(h) << 16; }

inline uint16_t F32BitsToBF16(uint32_t w) {
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return static_cast<uint16_t>((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16);
}

inline uint32_t F16ToF32Bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;
  if (em >= 0x7C00u) {  // Inf / NaN: exponent 0xFF, payload kept, NaN quieted.
    return sign | 0x7F800000u | ((em & 0x3FFu) << 13) | (em > 0x7C00u ? 0x00400000u : 0u);
  }
  if (em >= 0x0400u) return sign | ((em << 13) + 0x38000000u);  // normal: rebias 15 -> 127
  if (em == 0) return sign;
  // Subnormal em * 2^-24: normalise.
  const int p = std::bit_width(em) - 1;  // 0..9
  return sign | (static_cast<uint32_t>(p + 103) << 23) | ((em << (23 - p)) & 0x7FFFFFu);
}

inline uint16_t F32BitsToF16(uint32_t w) {
  const uint32_t sign = (w >> 16) & 0x8000u;
  const uint32_t a = w & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: RNE to Inf
  if (a >= 0x38800000u) {                                              // result normal (>= 2^-14)
    return static_cast<uint16_t>(sign | ((a - 0x38000000u + 0xFFFu + ((a >> 13) & 1u)) >> 13));
  }
  return static_cast<uint16_t>(sign | detail::F32MagnitudeToUnits(a, 24));  // units of 2^-24
}

// ---- 8-bit formats ----

inline uint32_t F8E4M3ToF32Bits(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t em = b & 0x7Fu;
  if (em == 0x7Fu) return sign | 0x7FF00000u;  // c10's bit result for the e4m3fn NaN
  if (em >= 0x08u) return sign | ((em << 20) + (120u << 23));
  if (em == 0) return sign;
  const int p = std::bit_width(em) - 1;  // 0..2, value em * 2^-9
  return sign | (static_cast<uint32_t>(p + 118) << 23) | ((em << (23 - p)) & 0x7FFFFFu);
}

inline uint8_t F32BitsToF8E4M3(uint32_t w) {
  const uint32_t sign = (w >> 24) & 0x80u;
  const uint32_t a = w & 0x7FFFFFFFu;
  if (a >= 0x43F00000u) return static_cast<uint8_t>(sign | 0x7Fu);  // >= 480, Inf, NaN -> NaN
  if (a >= (121u << 23)) {                                          // result normal (>= 2^-6)
    return static_cast<uint8_t>(sign | ((a - (120u << 23) + 0x7FFFFu + ((a >> 20) & 1u)) >> 20));
  }
  return static_cast<uint8_t>(sign | detail::F32MagnitudeToUnits(a, 9));  // units of 2^-9
}

inline uint32_t F8E5M2ToF32Bits(uint8_t b) { return F16ToF32Bits(static_cast<uint16_t>(b << 8)); }

inline uint8_t F32BitsToF8E5M2(uint32_t w) {
  const uint32_t sign = (w >> 24) & 0x80u;
  const uint32_t a = w & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);
  if (a >= (143u << 23)) return static_cast<uint8_t>(sign | 0x7Cu);  // >= 65536 or Inf -> Inf
  if (a >= (113u << 23)) {                                           // result normal (>= 2^-14)
    return static_cast<uint8_t>(sign | ((a - (112u << 23) + 0xFFFFFu + ((a >> 21) & 1u)) >> 21));
  }
  return static_cast<uint8_t>(sign | detail::F32MagnitudeToUnits(a, 16));  // units of 2^-16
}

// ---- F64 <-> F32 ----

inline uint32_t F64BitsToF32Bits(uint64_t w) {
  const uint64_t a = w & 0x7FFFFFFFFFFFFFFFull;
  const uint32_t sign = static_cast<uint32_t>(w >> 32) & 0x80000000u;
  if (a > 0x7FF0000000000000ull) {
    return sign | 0x7FC00000u | static_cast<uint32_t>((a >> 29) & 0x7FFFFFu);
  }
  if (a >= 0x47EFFFFFF0000000ull) return sign | 0x7F800000u;  // >= FLT_MAX + ulp/2 (tie -> Inf)
  if (a >= 0x3810000000000000ull) {                           // result normal (>= 2^-126)
    return sign | static_cast<uint32_t>((a - (896ull << 52) + 0x0FFFFFFFull + ((a >> 29) & 1u)) >> 29);
  }
  // Subnormal result: units of 2^-149.
  const uint64_t e = a >> 52;
  if (e == 0) return sign;  // f64 subnormal or zero: < 2^-1022, far below half a unit.
  const uint64_t sig = (a & 0xFFFFFFFFFFFFFull) | (1ull << 52);
  const int shift = 926 - static_cast<int>(e);  // >= 30 here
  if (shift > 54) return sign;
  return sign | static_cast<uint32_t>(detail::RneShiftRight(sig, static_cast<unsigned>(shift)));
}

inline uint64_t F32BitsToF64Bits(uint32_t w) {
  const uint64_t sign = static_cast<uint64_t>(w & 0x80000000u) << 32;
  const uint32_t a = w & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {  // Inf / NaN
    return sign | 0x7FF0000000000000ull | (static_cast<uint64_t>(a & 0x7FFFFFu) << 29) |
           (a > 0x7F800000u ? 0x0008000000000000ull : 0);
  }
  if (a >= 0x00800000u) return sign | ((static_cast<uint64_t>(a) << 29) + (896ull << 52));
  if (a == 0) return sign;
  const int p = std::bit_width(a) - 1;  // 0..22, value a * 2^-149
  return sign | (static_cast<uint64_t>(p - 149 + 1023) << 52) |
         ((static_cast<uint64_t>(a) << (52 - p)) & 0xFFFFFFFFFFFFFull);
}

// ---- element loads/stores that tolerate unaligned pointers ----
template <typename T>
inline T LoadAt(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
inline void StoreAt(void* p, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(p) + i * sizeof(T), &v, sizeof(T));
}

// ---- array versions (pointers may be unaligned; all use the functions above) ----
void BF16ToF32(const uint16_t* in, float* out, size_t n);
void F32ToBF16(const float* in, uint16_t* out, size_t n);
void F16ToF32(const uint16_t* in, float* out, size_t n);
void F32ToF16(const float* in, uint16_t* out, size_t n);
void F8E4M3ToF32(const uint8_t* in, float* out, size_t n);
void F32ToF8E4M3(const float* in, uint8_t* out, size_t n);
void F8E5M2ToF32(const uint8_t* in, float* out, size_t n);
void F32ToF8E5M2(const float* in, uint8_t* out, size_t n);
void F64ToF32(const double* in, float* out, size_t n);
void F32ToF64(const float* in, double* out, size_t n);

}  // namespace pb::kernels::scalar
