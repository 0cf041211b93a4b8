// Tests for the dtype conversion kernels (src/kernels/convert.h).
//
// Natively every Highway target that is both compiled into convert.cc and supported by this CPU is
// checked bit for bit against the scalar reference (convert_scalar.h), which in turn is checked
// against a literal port of torch's c10 scalar conversions. Under WASM (PB_STATIC_DISPATCH) the single
// SIMD128 target is checked the same way. Digests over fixed inputs are printed and compared with
// constants recorded natively, so a WASM run proves that both builds produce identical bits.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/convert_scalar.h"

#ifndef PB_STATIC_DISPATCH
#include "hwy/targets.h"
#endif

namespace {

using pb::Dtype;
namespace k = pb::kernels;
namespace ref = pb::kernels::scalar;

// ---------------------------------------------------------------------------------------------
// Literal port of torch's c10 scalar conversions (c10/util/BFloat16.h round_to_nearest_even,
// c10/util/Half.h fp16_ieee_{to,from}_fp32_value, c10/util/Float8_e4m3fn.h and Float8_e5m2.h),
// including their floating-point tricks. Used only as an oracle for the scalar reference.
namespace c10port {
float F(uint32_t w) { return ref::BitsFloat(w); }
uint32_t B(float x) { return ref::FloatBits(x); }

uint16_t Bf16RoundToNearestEven(float src) {
  if (std::isnan(src)) return UINT16_C(0x7FC0);
  const uint32_t u32 = B(src);
  const uint32_t rounding_bias = ((u32 >> 16) & 1) + UINT32_C(0x7FFF);
  return static_cast<uint16_t>((u32 + rounding_bias) >> 16);
}
float Fp16IeeeToFp32Value(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & UINT32_C(0x80000000);
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = UINT32_C(0xE0) << 23;
  const float exp_scale = F(UINT32_C(15) << 23);
  const float normalized_value = F((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = UINT32_C(126) << 23;
  const float magic_bias = 0.5f;
  const float denormalized_value = F((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = UINT32_C(1) << 27;
  return F(sign | (two_w < denormalized_cutoff ? B(denormalized_value) : B(normalized_value)));
}
uint16_t Fp16IeeeFromFp32Value(float f) {
  const float scale_to_inf = F(UINT32_C(239) << 23);
  const float scale_to_zero = F(UINT32_C(17) << 23);
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = B(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & UINT32_C(0x80000000);
  uint32_t bias = shl1_w & UINT32_C(0xFF000000);
  if (bias < UINT32_C(0x71000000)) bias = UINT32_C(0x71000000);
  base = F((bias >> 1) + UINT32_C(0x07800000)) + base;
  const uint32_t bits = B(base);
  const uint32_t exp_bits = (bits >> 13) & UINT32_C(0x00007C00);
  const uint32_t mantissa_bits = bits & UINT32_C(0x00000FFF);
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > UINT32_C(0xFF000000) ? 0x7E00u : nonsign));
}
float Fp8e4m3fnToFp32Value(uint8_t input) {
  const uint32_t w = static_cast<uint32_t>(input) << 24;
  const uint32_t sign = w & UINT32_C(0x80000000);
  const uint32_t nonsign = w & UINT32_C(0x7FFFFFFF);
  uint32_t renorm_shift = nonsign != 0 ? static_cast<uint32_t>(__builtin_clz(nonsign)) : 32u;
  renorm_shift = renorm_shift > 4 ? renorm_shift - 4 : 0;
  const int32_t inf_nan_mask = (static_cast<int32_t>(nonsign + 0x01000000) >> 8) & INT32_C(0x7F800000);
  const int32_t zero_mask = static_cast<int32_t>(nonsign - 1) >> 31;
  const uint32_t result =
      sign | ((((nonsign << renorm_shift >> 4) + ((0x78 - renorm_shift) << 23)) | static_cast<uint32_t>(inf_nan_mask)) &
              ~static_cast<uint32_t>(zero_mask));
  return F(result);
}
uint8_t Fp8e4m3fnFromFp32Value(float f) {
  constexpr uint32_t fp8_max = UINT32_C(1087) << 20;
  constexpr uint32_t denorm_mask = UINT32_C(141) << 23;
  uint32_t f_bits = B(f);
  uint8_t result = 0u;
  const uint32_t sign = f_bits & UINT32_C(0x80000000);
  f_bits ^= sign;
  if (f_bits >= fp8_max) {
    result = 0x7f;
  } else if (f_bits < (UINT32_C(121) << 23)) {
    f_bits = B(F(f_bits) + F(denorm_mask));
    result = static_cast<uint8_t>(f_bits - denorm_mask);
  } else {
    const uint8_t mant_odd = (f_bits >> 20) & 1;
    f_bits += (static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFF;
    f_bits += mant_odd;
    result = static_cast<uint8_t>(f_bits >> 20);
  }
  result |= static_cast<uint8_t>(sign >> 24);
  return result;
}
float Fp8e5m2ToFp32Value(uint8_t input) { return Fp16IeeeToFp32Value(static_cast<uint16_t>(input << 8)); }
uint8_t Fp8e5m2FromFp32Value(float f) {
  constexpr uint32_t fp32_inf = UINT32_C(255) << 23;
  constexpr uint32_t fp8_max = UINT32_C(143) << 23;
  constexpr uint32_t denorm_mask = UINT32_C(134) << 23;
  uint32_t f_bits = B(f);
  uint8_t result = 0u;
  const uint32_t sign = f_bits & UINT32_C(0x80000000);
  f_bits ^= sign;
  if (f_bits >= fp8_max) {
    result = f_bits > fp32_inf ? UINT8_C(0x7F) : UINT8_C(0x7C);
  } else if (f_bits < (UINT32_C(113) << 23)) {
    f_bits = B(F(f_bits) + F(denorm_mask));
    result = static_cast<uint8_t>(f_bits - denorm_mask);
  } else {
    const uint32_t mant_odd = (f_bits >> 21) & 1;
    f_bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFFF;
    f_bits += mant_odd;
    result = static_cast<uint8_t>(f_bits >> 21);
  }
  result |= static_cast<uint8_t>(sign >> 24);
  return result;
}
}  // namespace c10port

// ---------------------------------------------------------------------------------------------
// Deterministic test data (uint32 xorshift only: nothing em++ could vectorise differently).

struct XorShift32 {
  uint32_t s;
  uint32_t Next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
};

std::vector<uint32_t> F32EdgeBits() {
  std::vector<uint32_t> v = {
      0x00000000,
      0x00000001,
      0x00000002,
      0x007FFFFF,
      0x00800000,
      0x00800001,  // zero, subnormals
      0x3F800000,
      0x3F808000,
      0x3F818000,
      0x3F808001,
      0x3F807FFF,
      0x3F7FFFFF,  // bf16 ties
      0x7F7FFFFF,
      0x7F7F7FFF,
      0x7F7F8000,
      0x7F7FC000,
      0x7F800000,  // max, Inf
      0x7F800001,
      0x7F800100,
      0x7F802000,
      0x7F810000,
      0x7FA00000,
      0x7FBFFFFF,  // sNaNs
      0x7FC00000,
      0x7FC00001,
      0x7FC02000,
      0x7FD00000,
      0x7FFFFFFF,  // qNaNs
      // f16: max 65504, halfway 65520, first value above, 65536, smallest normal/subnormal, ties.
      0x477FE000,
      0x477FEFFF,
      0x477FF000,
      0x477FF001,
      0x47800000,
      0x38800000,
      0x387FFFFF,
      0x387FF000,
      0x387FE000,
      0x33800000,
      0x33000000,
      0x33000001,
      0x32FFFFFF,
      0x33C00000,
      0x33A00000,
      0x34200000,
      0x3F801000,
      0x3F803000,
      0x3F802FFF,
      0x3F801001,
      // e4m3fn: 448, 464 (tie -> 448), 465, 479.99, 480, 2^-6, 2^-9, 2^-10 (tie -> 0), 1.5*2^-9.
      0x43E00000,
      0x43E80000,
      0x43E80001,
      0x43EFFFFF,
      0x43F00000,
      0x43F00001,
      0x3C800000,
      0x3C7FFFFF,
      0x3B000000,
      0x3A800000,
      0x3A800001,
      0x3B400000,
      0x3BC00000,
      0x3F880000,
      0x3F980000,
      0x3F880001,
      // e5m2: 57344, 61440 (tie -> Inf), just below, 65536, 2^-14, 2^-16, 2^-17 (tie -> 0).
      0x47600000,
      0x47700000,
      0x476FFFFF,
      0x47800000,
      0x38800000,
      0x37800000,
      0x37000000,
      0x37000001,
      0x37C00000,
      0x3FA00000,
      0x3F900000,
      0x3FB00000,
  };
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(v[i] | 0x80000000u);  // negative twins
  return v;
}

// Edge cases, uniform random bit patterns, and random values concentrated near each narrow
// format's range (so rounding and subnormal paths get many hits).
std::vector<uint32_t> F32TestBits(size_t random_count) {
  std::vector<uint32_t> v = F32EdgeBits();
  XorShift32 rng{0x9E3779B9u};
  for (size_t i = 0; i < random_count; ++i) {
    uint32_t w = rng.Next();
    switch (i % 4) {
      case 0: break;                                                              // uniform bits
      case 1: w = (w & 0x807FFFFFu) | ((96u + (rng.Next() % 64u)) << 23); break;  // ~2^-31..2^32
      case 2:
        w = (w & 0x807FFFFFu) | ((100u + (rng.Next() % 48u)) << 23);  // few low bits
        w &= ~((1u << (rng.Next() % 24u)) - 1u);
        break;
      case 3:
        w = (w & 0x807FFFFFu) | ((rng.Next() % 256u) << 23);  // ties
        w = (w & ~0x1FFFFFu) | (((rng.Next() & 1u) ? 0x100000u : 0x80000u) & 0x1FFFFFu) | ((rng.Next() & 1u) << 16) |
            ((rng.Next() & 1u) << 12) | ((rng.Next() & 1u) << 15);
        break;
    }
    v.push_back(w);
  }
  return v;
}

std::vector<uint64_t> F64TestBits(size_t random_count) {
  std::vector<uint64_t> v = {
      0x0000000000000000ull, 0x0000000000000001ull, 0x000FFFFFFFFFFFFFull,  // zero, f64 subnormals
      0x3FF0000000000000ull, 0x3FF0000010000000ull, 0x3FF0000030000000ull,  // 1, ties
      0x3FF000000FFFFFFFull, 0x3FF0000010000001ull, 0x47EFFFFFE0000000ull,  // FLT_MAX
      0x47EFFFFFEFFFFFFFull, 0x47EFFFFFF0000000ull, 0x47F0000000000000ull,  // overflow boundary
      0x7FEFFFFFFFFFFFFFull, 0x7FF0000000000000ull,                         // DBL_MAX, Inf
      0x7FF0000000000001ull, 0x7FF0000020000000ull, 0x7FF4000000000000ull,  // sNaNs
      0x7FF8000000000000ull, 0x7FF8000000000001ull, 0x7FFFFFFFFFFFFFFFull,  // qNaNs
      0x3810000000000000ull, 0x380FFFFFFFFFFFFFull, 0x380FFFFFF0000000ull,  // 2^-126 boundary
      0x36A0000000000000ull, 0x3690000000000000ull, 0x3690000000000001ull,  // 2^-149, 2^-150
      0x368FFFFFFFFFFFFFull, 0x36A8000000000000ull, 0x36B8000000000000ull,  // 1.5, 3 x 2^-149
      0x36B4000000000000ull, 0x3680000000000000ull,
  };
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(v[i] | 0x8000000000000000ull);
  XorShift32 rng{0x12345678u};
  for (size_t i = 0; i < random_count; ++i) {
    uint64_t w = (static_cast<uint64_t>(rng.Next()) << 32) | rng.Next();
    if (i % 2) {  // exponent around the f32 range (2^-160 .. 2^140)
      const uint64_t e = 1023 - 160 + rng.Next() % 300;
      w = (w & 0x800FFFFFFFFFFFFFull) | (e << 52);
      if (i % 4 == 1) w &= ~((uint64_t{1} << (rng.Next() % 52)) - 1);
    }
    v.push_back(w);
  }
  return v;
}

std::vector<float> AsFloats(const std::vector<uint32_t>& bits) {
  std::vector<float> f(bits.size());
  std::memcpy(f.data(), bits.data(), bits.size() * 4);
  return f;
}

// FNV-1a over bytes.
uint64_t Fnv1a(const void* data, size_t bytes, uint64_t h = 0xCBF29CE484222325ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

// Runs `fn` once per Highway target: natively every compiled target this CPU supports (and checks
// that dispatch really picked it); under PB_STATIC_DISPATCH the single static target.
template <class Fn>
void ForEachTarget(const Fn& fn) {
#ifdef PB_STATIC_DISPATCH
  const std::string name = k::KernelTargetName();
  SCOPED_TRACE("target " + name);
  fn();
#else
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = k::KernelTargetName();
    EXPECT_EQ(name, hwy::TargetName(target));
    SCOPED_TRACE("target " + name);
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
#endif
}

std::string TargetList() {
  std::string s;
#ifdef PB_STATIC_DISPATCH
  s = k::KernelTargetName();
#else
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (!s.empty()) s += ",";
    s += hwy::TargetName(target);
  }
#endif
  return s;
}

template <typename T>
void ExpectSameBits(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && ++bad <= 5) {
      ADD_FAILURE() << what << ": element " << i << " differs";
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

// ---------------------------------------------------------------------------------------------

TEST(ConvertTargets, PrintExercised) {
  std::printf("[ convert  ] targets exercised: %s\n", TargetList().c_str());
  EXPECT_FALSE(TargetList().empty());
}

// The scalar reference equals the literal c10 port (exhaustive for 8/16-bit inputs).
TEST(ConvertScalar, MatchesC10Widening) {
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(ref::F16ToF32Bits(static_cast<uint16_t>(h)),
              c10port::B(c10port::Fp16IeeeToFp32Value(static_cast<uint16_t>(h))))
        << std::hex << h;
    ASSERT_EQ(ref::BF16ToF32Bits(static_cast<uint16_t>(h)), h << 16);
  }
  for (uint32_t b = 0; b < 256; ++b) {
    ASSERT_EQ(ref::F8E4M3ToF32Bits(static_cast<uint8_t>(b)),
              c10port::B(c10port::Fp8e4m3fnToFp32Value(static_cast<uint8_t>(b))))
        << std::hex << b;
    ASSERT_EQ(ref::F8E5M2ToF32Bits(static_cast<uint8_t>(b)),
              c10port::B(c10port::Fp8e5m2ToFp32Value(static_cast<uint8_t>(b))))
        << std::hex << b;
  }
}

TEST(ConvertScalar, MatchesC10Narrowing) {
  const std::vector<uint32_t> bits = F32TestBits(1 << 21);
  for (uint32_t w : bits) {
    const float f = ref::BitsFloat(w);
    ASSERT_EQ(ref::F32BitsToBF16(w), c10port::Bf16RoundToNearestEven(f)) << std::hex << w;
    ASSERT_EQ(ref::F32BitsToF16(w), c10port::Fp16IeeeFromFp32Value(f)) << std::hex << w;
    ASSERT_EQ(ref::F32BitsToF8E4M3(w), c10port::Fp8e4m3fnFromFp32Value(f)) << std::hex << w;
    ASSERT_EQ(ref::F32BitsToF8E5M2(w), c10port::Fp8e5m2FromFp32Value(f)) << std::hex << w;
  }
}

// F64 <-> F32 reference vs the compiler's conversion on every non-NaN input (NaN bits are our rule).
TEST(ConvertScalar, MatchesStaticCastF64) {
  for (uint64_t w : F64TestBits(1 << 20)) {
    const double d = ref::BitsDouble(w);
    if (std::isnan(d)) continue;
    ASSERT_EQ(ref::F64BitsToF32Bits(w), ref::FloatBits(static_cast<float>(d))) << std::hex << w;
  }
  for (uint32_t w : F32TestBits(1 << 20)) {
    const float f = ref::BitsFloat(w);
    if (std::isnan(f)) continue;
    ASSERT_EQ(ref::F32BitsToF64Bits(w), ref::DoubleBits(static_cast<double>(f))) << std::hex << w;
  }
}

TEST(ConvertScalar, KnownAnswers) {
  auto f = [](float x) { return ref::FloatBits(x); };
  // BF16: ties to even, NaN -> 0x7FC0 regardless of sign/payload.
  EXPECT_EQ(ref::F32BitsToBF16(f(1.00390625f)), 0x3F80);
  EXPECT_EQ(ref::F32BitsToBF16(f(1.01171875f)), 0x3F82);
  EXPECT_EQ(ref::F32BitsToBF16(f(-1.01171875f)), 0xBF82);
  EXPECT_EQ(ref::F32BitsToBF16(0x7F800000), 0x7F80);
  EXPECT_EQ(ref::F32BitsToBF16(0x7F7FFFFF), 0x7F80);  // FLT_MAX rounds up to Inf
  EXPECT_EQ(ref::F32BitsToBF16(0xFF800001), 0x7FC0);
  EXPECT_EQ(ref::F32BitsToBF16(0x00008000), 0x0000);  // subnormal tie to even
  EXPECT_EQ(ref::F32BitsToBF16(0x00018000), 0x0002);
  // F16
  EXPECT_EQ(ref::F32BitsToF16(f(65520.0f)), 0x7C00);
  EXPECT_EQ(ref::F32BitsToF16(f(65504.0f)), 0x7BFF);
  EXPECT_EQ(ref::F32BitsToF16(f(65519.996f)), 0x7BFF);
  EXPECT_EQ(ref::F32BitsToF16(f(-65520.0f)), 0xFC00);
  EXPECT_EQ(ref::F32BitsToF16(f(1.0f)), 0x3C00);
  EXPECT_EQ(ref::F32BitsToF16(f(1.0f + 0x1p-11f)), 0x3C00);      // tie -> even
  EXPECT_EQ(ref::F32BitsToF16(f(1.0f + 3 * 0x1p-11f)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(ref::F32BitsToF16(f(0x1p-24f)), 0x0001);
  EXPECT_EQ(ref::F32BitsToF16(f(0x1p-25f)), 0x0000);  // tie -> 0
  EXPECT_EQ(ref::F32BitsToF16(f(0x1.000002p-25f)), 0x0001);
  EXPECT_EQ(ref::F32BitsToF16(f(0x1.8p-24f)), 0x0002);    // 1.5 units -> 2
  EXPECT_EQ(ref::F32BitsToF16(f(0x1.ff8p-15f)), 0x03FF);  // largest subnormal
  EXPECT_EQ(ref::F32BitsToF16(f(0x1.ffcp-15f)), 0x0400);  // tie -> smallest normal
  EXPECT_EQ(ref::F32BitsToF16(f(0x1.ff4p-15f)), 0x03FE);  // 1022.5 units: tie -> even
  EXPECT_EQ(ref::F32BitsToF16(f(-0.0f)), 0x8000);
  EXPECT_EQ(ref::F32BitsToF16(0x7FC00000), 0x7E00);
  EXPECT_EQ(ref::F32BitsToF16(0xFF800001), 0xFE00);   // sign kept, payload dropped
  EXPECT_EQ(ref::F16ToF32Bits(0x7C01), 0x7FC02000u);  // signalling NaN quieted, payload kept
  EXPECT_EQ(ref::F16ToF32Bits(0xFD55), 0xFFEAA000u);
  EXPECT_EQ(ref::F16ToF32Bits(0x7E00), 0x7FC00000u);
  EXPECT_EQ(ref::F16ToF32Bits(0x7C00), 0x7F800000u);
  EXPECT_EQ(ref::F16ToF32Bits(0x0001), f(0x1p-24f));
  EXPECT_EQ(ref::F16ToF32Bits(0x03FF), f(0x1.ff8p-15f));
  EXPECT_EQ(ref::F16ToF32Bits(0x7BFF), f(65504.0f));
  EXPECT_EQ(ref::BF16ToF32Bits(0x7F81), 0x7F810000u);  // bf16 sNaN kept as is
  // F8 E4M3FN
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(448.0f)), 0x7E);
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(464.0f)), 0x7E);  // tie -> even (448)
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(465.0f)), 0x7F);  // rounds to the NaN code, as in c10
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(480.0f)), 0x7F);
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(-480.0f)), 0xFF);
  EXPECT_EQ(ref::F32BitsToF8E4M3(0x7F800000), 0x7F);  // +Inf -> NaN
  EXPECT_EQ(ref::F32BitsToF8E4M3(0xFF800000), 0xFF);
  EXPECT_EQ(ref::F32BitsToF8E4M3(0xFFC00000), 0xFF);
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(1.0f)), 0x38);
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(1.0625f)), 0x38);  // tie -> even
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(1.1875f)), 0x3A);  // tie -> even (up)
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(0x1p-9f)), 0x01);
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(0x1p-10f)), 0x00);  // tie -> 0
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(0x1.8p-9f)), 0x02);
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(0x1.cp-7f)), 0x07);  // 7 units, largest subnormal
  EXPECT_EQ(ref::F32BitsToF8E4M3(f(0x1.ep-7f)), 0x08);  // 7.5 units: tie -> 8 = 2^-6
  EXPECT_EQ(ref::F8E4M3ToF32Bits(0x7E), f(448.0f));
  EXPECT_EQ(ref::F8E4M3ToF32Bits(0x7F), 0x7FF00000u);
  EXPECT_EQ(ref::F8E4M3ToF32Bits(0xFF), 0xFFF00000u);
  EXPECT_EQ(ref::F8E4M3ToF32Bits(0x01), f(0x1p-9f));
  EXPECT_EQ(ref::F8E4M3ToF32Bits(0x07), f(0x1.cp-7f));
  EXPECT_EQ(ref::F8E4M3ToF32Bits(0x80), 0x80000000u);
  // F8 E5M2
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(57344.0f)), 0x7B);
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(61439.996f)), 0x7B);
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(61440.0f)), 0x7C);  // tie -> even = Inf
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(65536.0f)), 0x7C);
  EXPECT_EQ(ref::F32BitsToF8E5M2(0xFF800000), 0xFC);
  EXPECT_EQ(ref::F32BitsToF8E5M2(0x7F800001), 0x7F);
  EXPECT_EQ(ref::F32BitsToF8E5M2(0xFFC00000), 0xFF);
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(1.0f)), 0x3C);
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(1.125f)), 0x3C);  // tie -> even
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(1.375f)), 0x3E);  // tie -> even (up)
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(0x1p-16f)), 0x01);
  EXPECT_EQ(ref::F32BitsToF8E5M2(f(0x1p-17f)), 0x00);
  EXPECT_EQ(ref::F8E5M2ToF32Bits(0x7D), 0x7FE00000u);  // signalling NaN quieted
  EXPECT_EQ(ref::F8E5M2ToF32Bits(0x7C), 0x7F800000u);
  EXPECT_EQ(ref::F8E5M2ToF32Bits(0x7B), f(57344.0f));
  EXPECT_EQ(ref::F8E5M2ToF32Bits(0x01), f(0x1p-16f));
  // F64 <-> F32
  EXPECT_EQ(ref::F64BitsToF32Bits(ref::DoubleBits(1e300)), 0x7F800000u);
  EXPECT_EQ(ref::F64BitsToF32Bits(ref::DoubleBits(-1e300)), 0xFF800000u);
  EXPECT_EQ(ref::F64BitsToF32Bits(0x47EFFFFFE0000000ull), 0x7F7FFFFFu);
  EXPECT_EQ(ref::F64BitsToF32Bits(0x47EFFFFFF0000000ull), 0x7F800000u);
  EXPECT_EQ(ref::F64BitsToF32Bits(0x7FF0000000000001ull), 0x7FC00000u);
  EXPECT_EQ(ref::F64BitsToF32Bits(0xFFF4000000000000ull), 0xFFE00000u);
  EXPECT_EQ(ref::F64BitsToF32Bits(ref::DoubleBits(0x1p-150)), 0x00000000u);  // tie -> 0
  EXPECT_EQ(ref::F64BitsToF32Bits(ref::DoubleBits(0x1.8p-149)), 0x00000002u);
  EXPECT_EQ(ref::F64BitsToF32Bits(ref::DoubleBits(1.0 + 0x1p-24)), 0x3F800000u);
  EXPECT_EQ(ref::F32BitsToF64Bits(0x7F800001), 0x7FF8000020000000ull);
  EXPECT_EQ(ref::F32BitsToF64Bits(0x00000001), ref::DoubleBits(0x1p-149));
}

// ---------------------------------------------------------------------------------------------
// Kernels vs reference, every target.

TEST(ConvertKernels, AllSixteenBitInputs) {
  std::vector<uint16_t> in(65536);
  for (uint32_t i = 0; i < 65536; ++i) in[i] = static_cast<uint16_t>(i);
  std::vector<float> want_bf(65536), want_h(65536);
  ref::BF16ToF32(in.data(), want_bf.data(), in.size());
  ref::F16ToF32(in.data(), want_h.data(), in.size());
  ForEachTarget([&] {
    std::vector<float> got(65536);
    k::BF16ToF32(in.data(), got.data(), in.size());
    ExpectSameBits(got, want_bf, "BF16ToF32");
    k::F16ToF32(in.data(), got.data(), in.size());
    ExpectSameBits(got, want_h, "F16ToF32");
  });
}

TEST(ConvertKernels, AllEightBitInputs) {
  std::vector<uint8_t> in(256);
  for (uint32_t i = 0; i < 256; ++i) in[i] = static_cast<uint8_t>(i);
  std::vector<float> want_e4(256), want_e5(256);
  ref::F8E4M3ToF32(in.data(), want_e4.data(), 256);
  ref::F8E5M2ToF32(in.data(), want_e5.data(), 256);
  ForEachTarget([&] {
    std::vector<float> got(256);
    k::F8E4M3ToF32(in.data(), got.data(), 256);
    ExpectSameBits(got, want_e4, "F8E4M3ToF32");
    k::F8E5M2ToF32(in.data(), got.data(), 256);
    ExpectSameBits(got, want_e5, "F8E5M2ToF32");
  });
}

TEST(ConvertKernels, NarrowingEdgesAndRandom) {
  const std::vector<float> in = AsFloats(F32TestBits(3 << 20));
  const size_t n = in.size();
  std::vector<uint16_t> want_bf(n), want_h(n);
  std::vector<uint8_t> want_e4(n), want_e5(n);
  std::vector<double> want_d(n);
  ref::F32ToBF16(in.data(), want_bf.data(), n);
  ref::F32ToF16(in.data(), want_h.data(), n);
  ref::F32ToF8E4M3(in.data(), want_e4.data(), n);
  ref::F32ToF8E5M2(in.data(), want_e5.data(), n);
  ref::F32ToF64(in.data(), want_d.data(), n);
  ForEachTarget([&] {
    std::vector<uint16_t> g16(n);
    std::vector<uint8_t> g8(n);
    std::vector<double> gd(n);
    k::F32ToBF16(in.data(), g16.data(), n);
    ExpectSameBits(g16, want_bf, "F32ToBF16");
    k::F32ToF16(in.data(), g16.data(), n);
    ExpectSameBits(g16, want_h, "F32ToF16");
    k::F32ToF8E4M3(in.data(), g8.data(), n);
    ExpectSameBits(g8, want_e4, "F32ToF8E4M3");
    k::F32ToF8E5M2(in.data(), g8.data(), n);
    ExpectSameBits(g8, want_e5, "F32ToF8E5M2");
    k::F32ToF64(in.data(), gd.data(), n);
    ExpectSameBits(gd, want_d, "F32ToF64");
  });
}

TEST(ConvertKernels, F64ToF32EdgesAndRandom) {
  const std::vector<uint64_t> bits = F64TestBits(1 << 20);
  std::vector<double> in(bits.size());
  std::memcpy(in.data(), bits.data(), bits.size() * 8);
  std::vector<float> want(in.size());
  ref::F64ToF32(in.data(), want.data(), in.size());
  ForEachTarget([&] {
    std::vector<float> got(in.size());
    k::F64ToF32(in.data(), got.data(), in.size());
    ExpectSameBits(got, want, "F64ToF32");
  });
}

// Every non-NaN F16 / BF16 value survives F16 -> F32 -> F16 (BF16 likewise) bit for bit; NaNs come
// back as the canonical NaN of the F32 -> narrow rule (F16: sign | 0x7E00, BF16: 0x7FC0).
TEST(ConvertKernels, SixteenBitRoundTrip) {
  std::vector<uint16_t> in(65536);
  for (uint32_t i = 0; i < 65536; ++i) in[i] = static_cast<uint16_t>(i);
  ForEachTarget([&] {
    std::vector<float> mid(65536);
    std::vector<uint16_t> back(65536);
    k::F16ToF32(in.data(), mid.data(), 65536);
    k::F32ToF16(mid.data(), back.data(), 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      const bool nan = (h & 0x7FFF) > 0x7C00;
      const uint16_t want = nan ? static_cast<uint16_t>((h & 0x8000) | 0x7E00) : static_cast<uint16_t>(h);
      ASSERT_EQ(back[h], want) << "F16 " << std::hex << h;
    }
    k::BF16ToF32(in.data(), mid.data(), 65536);
    k::F32ToBF16(mid.data(), back.data(), 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      const bool nan = (h & 0x7FFF) > 0x7F80;
      ASSERT_EQ(back[h], nan ? 0x7FC0 : h) << "BF16 " << std::hex << h;
    }
  });
}

// Unaligned pointers and every short length / tail size, for all kernels.
TEST(ConvertKernels, UnalignedAndTails) {
  const std::vector<uint32_t> bits = F32TestBits(512);
  std::vector<unsigned char> src(bits.size() * 8 + 64), dst(bits.size() * 8 + 64), want(bits.size() * 8 + 64);
  XorShift32 rng{7};
  for (auto& c : src) c = static_cast<unsigned char>(rng.Next());
  std::memcpy(src.data() + 3, bits.data(), bits.size() * 4);  // meaningful f32 data at offset 3
  const Dtype types[] = {Dtype::F16, Dtype::BF16, Dtype::F32, Dtype::F64, Dtype::F8_E4M3, Dtype::F8_E5M2};
  ForEachTarget([&] {
    for (Dtype from : types) {
      for (Dtype to : types) {
        for (size_t in_off : {0, 1, 3}) {
          for (size_t out_off : {0, 2, 5}) {
            for (size_t n : {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 517}) {
              std::memset(dst.data(), 0xAB, dst.size());
              std::memset(want.data(), 0xAB, want.size());
              ASSERT_TRUE(k::ConvertElements(from, to, src.data() + in_off, dst.data() + out_off, n));
              // Reference: widen to F32 with the scalar code, then narrow with it.
              std::vector<float> mid(n);
              const unsigned char* s = src.data() + in_off;
              unsigned char* w = want.data() + out_off;
              if (from == to) {
                std::memcpy(w, s, n * pb::DtypeBits(from) / 8);
              } else if (from == Dtype::F32 && to == Dtype::F64) {
                ref::F32ToF64(reinterpret_cast<const float*>(s), reinterpret_cast<double*>(w), n);
              } else {
                switch (from) {
                  case Dtype::F16: ref::F16ToF32(reinterpret_cast<const uint16_t*>(s), mid.data(), n); break;
                  case Dtype::BF16: ref::BF16ToF32(reinterpret_cast<const uint16_t*>(s), mid.data(), n); break;
                  case Dtype::F32: std::memcpy(mid.data(), s, n * 4); break;
                  case Dtype::F64: ref::F64ToF32(reinterpret_cast<const double*>(s), mid.data(), n); break;
                  case Dtype::F8_E4M3: ref::F8E4M3ToF32(s, mid.data(), n); break;
                  case Dtype::F8_E5M2: ref::F8E5M2ToF32(s, mid.data(), n); break;
                  default: FAIL();
                }
                switch (to) {
                  case Dtype::F16: ref::F32ToF16(mid.data(), reinterpret_cast<uint16_t*>(w), n); break;
                  case Dtype::BF16: ref::F32ToBF16(mid.data(), reinterpret_cast<uint16_t*>(w), n); break;
                  case Dtype::F32: std::memcpy(w, mid.data(), n * 4); break;
                  case Dtype::F64: ref::F32ToF64(mid.data(), reinterpret_cast<double*>(w), n); break;
                  case Dtype::F8_E4M3: ref::F32ToF8E4M3(mid.data(), w, n); break;
                  case Dtype::F8_E5M2: ref::F32ToF8E5M2(mid.data(), w, n); break;
                  default: FAIL();
                }
              }
              ASSERT_EQ(0, std::memcmp(dst.data(), want.data(), dst.size()))
                  << pb::DtypeName(from) << "->" << pb::DtypeName(to) << " in_off " << in_off << " out_off " << out_off
                  << " n " << n;
            }
          }
        }
      }
    }
  });
}

// Outputs of 4 MiB and more take the streaming-store path (natively), which first aligns the output.
TEST(ConvertKernels, LargeBuffersStreamingPath) {
  const size_t n = (size_t{5} << 20) / 4 + 13;  // > 4 MiB of f32 output
  std::vector<uint16_t> in(n + 8);
  XorShift32 rng{99};
  for (auto& h : in) h = static_cast<uint16_t>(rng.Next());
  std::vector<unsigned char> out(n * 8 + 64);
  std::vector<float> want(n);
  ForEachTarget([&] {
    for (size_t off : {0, 4, 12}) {  // element-aligned, different vector alignments
      float* o = reinterpret_cast<float*>(out.data() + off);
      k::F16ToF32(in.data() + 1, o, n);
      ref::F16ToF32(in.data() + 1, want.data(), n);
      ASSERT_EQ(0, std::memcmp(o, want.data(), n * 4)) << "F16ToF32 off " << off;
      k::BF16ToF32(in.data(), o, n);
      ref::BF16ToF32(in.data(), want.data(), n);
      ASSERT_EQ(0, std::memcmp(o, want.data(), n * 4)) << "BF16ToF32 off " << off;
      std::vector<uint16_t> back(n), back_want(n);
      k::F32ToBF16(want.data(), back.data(), n);
      ref::F32ToBF16(want.data(), back_want.data(), n);
      ASSERT_EQ(back, back_want);
      std::vector<double> d(n), d_want(n);
      k::F32ToF64(want.data(), d.data(), n);
      ref::F32ToF64(want.data(), d_want.data(), n);
      ASSERT_EQ(0, std::memcmp(d.data(), d_want.data(), n * 8));
    }
  });
}

TEST(ConvertElements, SupportedPairs) {
  EXPECT_TRUE(k::CanConvert(Dtype::F16, Dtype::F8_E4M3));
  EXPECT_TRUE(k::CanConvert(Dtype::I32, Dtype::I32));  // same dtype: copy
  EXPECT_FALSE(k::CanConvert(Dtype::I32, Dtype::F32));
  EXPECT_FALSE(k::CanConvert(Dtype::F32, Dtype::F8_E8M0));
  float x = 1.0f;
  uint32_t y = 0;
  EXPECT_FALSE(k::ConvertElements(Dtype::F32, Dtype::I32, &x, &y, 1));
  EXPECT_TRUE(k::ConvertElements(Dtype::I32, Dtype::I32, &x, &y, 1));
  EXPECT_EQ(y, 0x3F800000u);
}

// ---------------------------------------------------------------------------------------------
// Digests over fixed inputs. The expected values were recorded natively; the WASM build must
// reproduce them exactly (this is how native/WASM bit identity is checked).

uint64_t DigestAllKernels(bool print) {
  uint64_t all = 0xCBF29CE484222325ull;
  auto report = [&](const char* name, const void* p, size_t bytes) {
    const uint64_t h = Fnv1a(p, bytes);
    if (print) std::printf("[ convert  ] digest %-12s %016llx\n", name, static_cast<unsigned long long>(h));
    all = Fnv1a(&h, sizeof(h), all);
  };
  std::vector<uint16_t> in16(65536);
  for (uint32_t i = 0; i < 65536; ++i) in16[i] = static_cast<uint16_t>(i);
  std::vector<uint8_t> in8(256);
  for (uint32_t i = 0; i < 256; ++i) in8[i] = static_cast<uint8_t>(i);
  const std::vector<float> f32 = AsFloats(F32TestBits(1 << 20));
  const std::vector<uint64_t> f64bits = F64TestBits(1 << 19);
  std::vector<double> f64(f64bits.size());
  std::memcpy(f64.data(), f64bits.data(), f64bits.size() * 8);

  std::vector<float> o32(65536);
  k::BF16ToF32(in16.data(), o32.data(), 65536);
  report("BF16ToF32", o32.data(), 65536 * 4);
  k::F16ToF32(in16.data(), o32.data(), 65536);
  report("F16ToF32", o32.data(), 65536 * 4);
  k::F8E4M3ToF32(in8.data(), o32.data(), 256);
  report("F8E4M3ToF32", o32.data(), 256 * 4);
  k::F8E5M2ToF32(in8.data(), o32.data(), 256);
  report("F8E5M2ToF32", o32.data(), 256 * 4);
  const size_t n = f32.size();
  std::vector<uint16_t> o16(n);
  std::vector<uint8_t> o8(n);
  std::vector<double> o64(n);
  k::F32ToBF16(f32.data(), o16.data(), n);
  report("F32ToBF16", o16.data(), n * 2);
  k::F32ToF16(f32.data(), o16.data(), n);
  report("F32ToF16", o16.data(), n * 2);
  k::F32ToF8E4M3(f32.data(), o8.data(), n);
  report("F32ToF8E4M3", o8.data(), n);
  k::F32ToF8E5M2(f32.data(), o8.data(), n);
  report("F32ToF8E5M2", o8.data(), n);
  k::F32ToF64(f32.data(), o64.data(), n);
  report("F32ToF64", o64.data(), n * 8);
  std::vector<float> of(f64.size());
  k::F64ToF32(f64.data(), of.data(), f64.size());
  report("F64ToF32", of.data(), of.size() * 4);
  // All 36 ConvertElements pairs over the same random bytes.
  const Dtype types[] = {Dtype::F16, Dtype::BF16, Dtype::F32, Dtype::F64, Dtype::F8_E4M3, Dtype::F8_E5M2};
  std::vector<unsigned char> bytes(8 * 10007);
  XorShift32 rng{2024};
  for (auto& c : bytes) c = static_cast<unsigned char>(rng.Next());
  std::vector<unsigned char> out(8 * 10007);
  uint64_t pairs = 0xCBF29CE484222325ull;
  for (Dtype from : types) {
    for (Dtype to : types) {
      std::memset(out.data(), 0, out.size());
      k::ConvertElements(from, to, bytes.data(), out.data(), 10007);
      pairs = Fnv1a(out.data(), out.size(), pairs);
    }
  }
  report("pairs", &pairs, sizeof(pairs));
  if (print) std::printf("[ convert  ] digest %-12s %016llx\n", "ALL", static_cast<unsigned long long>(all));
  return all;
}

TEST(ConvertDigest, MatchesRecordedNativeDigest) {
  // Recorded from the scalar reference semantics (native build); WASM must match bit for bit.
  constexpr uint64_t kExpected = 0xF60BB554797078CAull;
  uint64_t first = 0;
  bool have_first = false;
  ForEachTarget([&] {
    const uint64_t d = DigestAllKernels(!have_first);
    if (!have_first) {
      first = d;
      have_first = true;
    }
    EXPECT_EQ(d, first) << "targets disagree";
  });
  std::printf("[ convert  ] digest over targets %s: %016llx\n", TargetList().c_str(),
              static_cast<unsigned long long>(first));
  EXPECT_EQ(first, kExpected);
}

}  // namespace
