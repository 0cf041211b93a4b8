// Tensor data in the ggml types a LoRA adapter is written in, bit for bit as gguf-py encodes it
// (gguf-py/gguf/quants.py, numpy's float16 cast): F32 as is; F16 round-to-nearest-even (NaN keeps its sign and
// top mantissa bits, numpy's rule); BF16 round-to-nearest-even with NaN made quiet (ggml_compute_fp32_to_bf16);
// Q8_0 in blocks of 32 along the last dimension: d = max|x| / 127 in fp32, q = round-half-away(x · (1/d)),
// d stored as fp16 (quantize_row_q8_0_ref). Decoding is exact (Q8_0: q · fp16(d)).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gguf/gguf_format.h"

namespace pb::gguf {

// Appends `values` encoded as `type`. For Q8_0, values.size() must be a multiple of 32 (callers checked the
// shape with TensorByteSize).
void EncodeValues(TensorType type, std::span<const float> values, std::vector<uint8_t>& out);

// Decodes `count` elements of `type` from `bytes` (which hold exactly their encoding) into `out`.
void DecodeValues(TensorType type, std::span<const uint8_t> bytes, float* out, uint64_t count);

}  // namespace pb::gguf
