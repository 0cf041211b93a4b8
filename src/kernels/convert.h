// Dtype conversion kernels (Google Highway). Plain-pointer API; no vector types leak out.
//
// Semantics follow torch's scalar c10 conversions wherever torch defines them:
//  - F32 -> BF16 / F16 / F8: round to nearest, ties to even. Subnormals exact.
//  - NaN stays NaN (see convert.cc for the exact NaN bit patterns each direction produces).
//  - Widening (BF16/F16/F8 -> F32) is exact, Inf and subnormals included.
// Natively the best target is chosen at run time (HWY_DYNAMIC_DISPATCH); the WASM build is compiled for
// SIMD128 only (PB_STATIC_DISPATCH). Every target gives identical bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace pb::kernels {

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

// True when ConvertElements supports from -> to (both IsConvertibleFloat, or from == to).
bool CanConvert(Dtype from, Dtype to);
// Converts n elements of little-endian `from` data into `to` data. Pairs without a direct kernel go
// through F32 in blocks (exact widening, then one rounding), as torch's .to() does. Unaligned
// pointers are allowed. Returns false for unsupported pairs.
bool ConvertElements(Dtype from, Dtype to, const void* in, void* out, size_t n);

// Name of the Highway target the kernels currently dispatch to (e.g. "AVX2"; "WASM" in the WASM
// build). For tests and diagnostics.
const char* KernelTargetName();

}  // namespace pb::kernels
