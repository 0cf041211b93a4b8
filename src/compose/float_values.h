// Tensors as float64 values and back: the adapter algebra computes in double, and rounds where PEFT's torch
// code rounds (its dtype after each operation, with --peft-compat) or once at the end (exact mode). Rounding
// goes through the conversion kernels' scalar reference (kernels/convert_scalar.h), torch's rules bit for bit,
// so results are the same natively and in WASM.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "adapter/adapter.h"
#include "core/dtype.h"
#include "core/result.h"
#include "linalg/matrix.h"

namespace pb::compose {

// x rounded to `dtype` (F32, F16, BF16: as torch rounds a float64 to it, through float32 for the 16-bit types;
// F64: x), as a double.
double RoundTo(Dtype dtype, double x);

// A held float tensor as a rows × cols matrix of its values (rows = shape[0], cols = the other dims' product).
// InvalidArgument for a non-float dtype.
Result<linalg::Matrix> MatrixOf(const adapter::Tensor& t);

// The matrix's values in `dtype` (rounded as RoundTo), little-endian, row-major.
std::vector<uint8_t> BytesOf(const linalg::Matrix& m, Dtype dtype);

// Every value of `m` replaced by RoundTo(dtype, value).
void RoundAll(linalg::Matrix& m, Dtype dtype);

// InvalidArgument naming `what` and the dtype when a value of `m` is Inf or NaN: a result that overflowed the
// dtype it is written in (weights of 1e308, say) is refused, never written.
Status RequireFinite(const linalg::Matrix& m, Dtype dtype, const std::string& what);

}  // namespace pb::compose
