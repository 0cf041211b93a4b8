#include "kernels/convert_scalar.h"

namespace pb::kernels::scalar {

void BF16ToF32(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) StoreAt<uint32_t>(out, i, BF16ToF32Bits(LoadAt<uint16_t>(in, i)));
}
void F32ToBF16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) StoreAt<uint16_t>(out, i, F32BitsToBF16(LoadAt<uint32_t>(in, i)));
}
void F16ToF32(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) StoreAt<uint32_t>(out, i, F16ToF32Bits(LoadAt<uint16_t>(in, i)));
}
void F32ToF16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) StoreAt<uint16_t>(out, i, F32BitsToF16(LoadAt<uint32_t>(in, i)));
}
void F8E4M3ToF32(const uint8_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) StoreAt<uint32_t>(out, i, F8E4M3ToF32Bits(in[i]));
}
void F32ToF8E4M3(const float* in, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = F32BitsToF8E4M3(LoadAt<uint32_t>(in, i));
}
void F8E5M2ToF32(const uint8_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) StoreAt<uint32_t>(out, i, F8E5M2ToF32Bits(in[i]));
}
void F32ToF8E5M2(const float* in, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = F32BitsToF8E5M2(LoadAt<uint32_t>(in, i));
}
void F64ToF32(const double* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) StoreAt<uint32_t>(out, i, F64BitsToF32Bits(LoadAt<uint64_t>(in, i)));
}
void F32ToF64(const float* in, double* out, size_t n) {
  for (size_t i = 0; i < n; ++i) StoreAt<uint64_t>(out, i, F32BitsToF64Bits(LoadAt<uint32_t>(in, i)));
}

}  // namespace pb::kernels::scalar
