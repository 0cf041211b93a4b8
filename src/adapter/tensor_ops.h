// Whole-tensor rearrangements the format translations need. Each is exact (a permutation of elements) except
// ScaleTensor, which rounds once, the way torch does `(B.float() * float32(s)).to(dtype)`. On a held tensor they
// apply at once; on a reference (bytes still in the file) they are checked now and recorded as a step that
// Materialize applies once the bytes are fetched, with the same result.
#pragma once

#include <span>

#include "adapter/adapter.h"
#include "gguf/gguf_format.h"

namespace pb::adapter {

// [rows, cols] -> [cols, rows]. InvalidArgument unless 2-D.
Result<Tensor> Transpose2D(const Tensor& t);

// Row i of the result is row order[i] of `t` (rows = first dimension). InvalidArgument if the order does not
// cover the rows.
Result<Tensor> PermuteRows(const Tensor& t, std::span<const uint64_t> order);

// The inverse permutation of `order`.
std::vector<uint64_t> InvertOrder(std::span<const uint64_t> order);

// t * s, elementwise: F16/BF16/F32 go through fp32 with s rounded to fp32 first (torch multiplies an fp32
// tensor by a Python float that way), then one round-to-nearest-even back to t's dtype; F64 stays in double.
// UnsupportedDtype for non-float tensors.
Result<Tensor> ScaleTensor(const Tensor& t, double s);

// A referenced tensor made whole from `stored` (the bytes of its ref's range): the recorded steps applied in
// order. A held tensor is returned as is. InvalidArgument if `stored` is not the range's size.
Result<Tensor> Materialize(const Tensor& t, std::vector<uint8_t> stored);

// The F32 tensor of `shape` whose elements `bytes` hold in ggml type `type` (exact). InvalidArgument if the size
// does not match.
Result<Tensor> DecodeGguf(gguf::TensorType type, const std::vector<uint64_t>& shape, std::span<const uint8_t> bytes);

// A 0-dim F32 tensor holding `value` (kohya's per-module alpha).
Tensor ScalarF32(float value);
// The value of a 0-dim or one-element float tensor, as double. InvalidArgument otherwise.
Result<double> ScalarValue(const Tensor& t);

}  // namespace pb::adapter
