// Weight quantization kernels: the arithmetic of `--quantize`, bit for bit as the Python libraries compute it.
//
// compressed-tensors 0.20.1 (quantization/utils/helpers.py calculate_qparams, lifecycle/forward_helpers.py
// _quantize, compressors/pack_quantized/helpers.py pack_to_int32), symmetric min-max, for a weight observed in
// dtype T (the model's dtype: BF16, F16 or F32):
//     amax  = max(|min(x, 0)|, max(x, 0))                    over the group (a row, or `group` columns of it)
//     scale = T(amax / D)   D = (qmax - qmin) / 2: 448 (FP8 E4M3), 127.5 (INT8), 7.5 (INT4); the division in
//                            fp32 (torch's opmath for a T tensor divided by a Python float), rounded once to T
//     scale = eps(T) where it is 0                            (2^-7 BF16, 2^-10 F16, 2^-23 F32)
//     q     = cast(clamp(T(x / scale), qmin, qmax))          x / scale as torch divides two T tensors: in fp32,
//                                                             rounded to T; INT: round half to even; FP8: RNE
//                                                             to e4m3 (after the clamp, so never NaN)
// transformers 5.24 FineGrainedFP8 (integrations/finegrained_fp8.py Fp8Quantize), per block of the fp32 weight:
//     s = (1 / amax) * 448 (fp32: torch computes the Python float 448 over a tensor as its reciprocal times 448),
//     1 where amax = 0;  q = e4m3(clamp(x * s, -448, 448));  weight_scale_inv = 1 / s (the reciprocal of s)
// A NaN in a group makes its scale NaN; such groups quantize to 0 here (torch's result is undefined for INT
// and NaN for FP8 before the clamp): `merge --safe` refuses NaN first.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace pb::kernels {

enum class QuantType { kFp8E4M3, kInt8, kInt4 };

int QuantBits(QuantType type);

// Quantizes `rows` rows of `cols` values in groups of `group` consecutive columns (group == cols: one scale
// per row, compressed-tensors' "channel"). `x` holds values of dtype `t` widened to fp32 (exact). Writes
// q[rows * cols] (int8 two's complement for INT, e4m3 bytes for FP8) and scales[rows * (cols / group)] as
// little-endian `t`. Returns false when t is not BF16/F16/F32, group is 0 or does not divide cols.
bool QuantizeSymmetric(const float* x, size_t rows, size_t cols, size_t group, QuantType type, Dtype t, uint8_t* q,
                       uint8_t* scales);

// compressed-tensors' pack-quantized layout of signed `bits`-bit values (4 or 8): each value plus 2^(bits-1),
// 32 / bits per int32 word, the first in the lowest bits, along each row; a row's last word is zero-padded.
// Writes rows * PackedWords(cols, bits) little-endian int32.
size_t PackedWords(size_t cols, int bits);
void PackInt32(const int8_t* q, size_t rows, size_t cols, int bits, uint8_t* out);

// transformers' FineGrainedFP8 on one band of `rows` rows (at most one block tall) and `cols` columns, blocks
// `block_cols` wide (cols % block_cols == 0): q[rows * cols] e4m3 bytes, inv_scales[cols / block_cols] fp32.
bool QuantizeFp8Blocks(const float* x, size_t rows, size_t cols, size_t block_cols, uint8_t* q, float* inv_scales);

// The quantized values back as fp32, exactly: q (int8 or e4m3) times its group's scale (fp32, widened), the
// product rounded to `t` (compressed-tensors' dequantize multiplies in the scale's dtype). For the error report.
void DequantizeSymmetric(const uint8_t* q, const float* scales, size_t rows, size_t cols, size_t group, QuantType type,
                         Dtype t, float* out);

}  // namespace pb::kernels
