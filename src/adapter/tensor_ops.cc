#include "adapter/tensor_ops.h"

#include <cstring>

#include "gguf/gguf_encode.h"
#include "kernels/convert.h"

namespace pb::adapter {

namespace {

// `t` (a reference) with one more step recorded and its shape after the step.
Tensor Deferred(const Tensor& t, Rearrangement step, std::vector<uint64_t> shape_after) {
  Tensor out = t;
  step.shape = t.shape;
  out.ref->steps.push_back(std::move(step));
  out.shape = std::move(shape_after);
  return out;
}

}  // namespace

Result<Tensor> Transpose2D(const Tensor& t) {
  if (t.shape.size() != 2) return MakeError(ErrorCode::InvalidArgument, "transpose needs a 2-D tensor");
  const uint64_t rows = t.shape[0], cols = t.shape[1];
  const size_t width = DtypeBits(t.dtype) / 8;
  if (width == 0) return MakeError(ErrorCode::UnsupportedDtype, "cannot transpose sub-byte dtypes");
  if (!t.held()) return Deferred(t, {Rearrangement::Kind::kTranspose2D, {}, nullptr, 1}, {cols, rows});
  Tensor out{t.dtype, {cols, rows}, std::vector<uint8_t>(t.bytes.size())};
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c)
      std::memcpy(&out.bytes[(c * rows + r) * width], &t.bytes[(r * cols + c) * width], width);
  return out;
}

Result<Tensor> PermuteRows(const Tensor& t, std::span<const uint64_t> order) {
  if (t.shape.empty() || order.size() != t.shape[0])
    return MakeError(ErrorCode::InvalidArgument, "row order does not match the tensor's rows");
  if (!t.held()) {
    for (uint64_t i : order)
      if (i >= order.size()) return MakeError(ErrorCode::InvalidArgument, "row order out of range");
    auto shared = std::make_shared<const std::vector<uint64_t>>(order.begin(), order.end());
    return Deferred(t, {Rearrangement::Kind::kPermuteRows, {}, std::move(shared), 1}, t.shape);
  }
  const size_t row_bytes = t.bytes.size() / (t.shape[0] ? t.shape[0] : 1);
  Tensor out{t.dtype, t.shape, std::vector<uint8_t>(t.bytes.size())};
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] >= order.size()) return MakeError(ErrorCode::InvalidArgument, "row order out of range");
    std::memcpy(&out.bytes[i * row_bytes], &t.bytes[order[i] * row_bytes], row_bytes);
  }
  return out;
}

std::vector<uint64_t> InvertOrder(std::span<const uint64_t> order) {
  std::vector<uint64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = i;
  return inverse;
}

Result<Tensor> ScaleTensor(const Tensor& t, double s) {
  if (!t.held()) {
    if (t.dtype != Dtype::F64 && !IsConvertibleFloat(t.dtype))
      return MakeError(ErrorCode::UnsupportedDtype, "cannot scale a " + std::string(DtypeName(t.dtype)) + " tensor");
    return Deferred(t, {Rearrangement::Kind::kScale, {}, nullptr, s}, t.shape);
  }
  const size_t n = t.element_count();
  Tensor out{t.dtype, t.shape, std::vector<uint8_t>(t.bytes.size())};
  if (t.dtype == Dtype::F64) {
    for (size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, &t.bytes[i * 8], 8);
      v *= s;
      std::memcpy(&out.bytes[i * 8], &v, 8);
    }
    return out;
  }
  if (!IsConvertibleFloat(t.dtype))
    return MakeError(ErrorCode::UnsupportedDtype, "cannot scale a " + std::string(DtypeName(t.dtype)) + " tensor");
  std::vector<float> wide(n);
  kernels::ConvertElements(t.dtype, Dtype::F32, t.bytes.data(), wide.data(), n);
  const float s32 = static_cast<float>(s);
  for (float& v : wide) v *= s32;
  kernels::ConvertElements(Dtype::F32, t.dtype, wide.data(), out.bytes.data(), n);
  return out;
}

Result<Tensor> Materialize(const Tensor& t, std::vector<uint8_t> stored) {
  if (t.held()) return t;
  const TensorRef& ref = *t.ref;
  if (stored.size() != ref.range.size())
    return MakeError(ErrorCode::InvalidArgument, "internal: " + std::to_string(stored.size()) + " bytes given for a " +
                                                     std::to_string(ref.range.size()) + "-byte tensor");
  Tensor cur{t.dtype, ref.stored_shape, std::move(stored), std::nullopt};
  if (ref.stored_gguf_type) {
    PB_ASSIGN_OR_RETURN(auto decoded, DecodeGguf(*ref.stored_gguf_type, ref.stored_shape, cur.bytes));
    cur = std::move(decoded);
  }
  for (const Rearrangement& step : ref.steps) {
    cur.shape = step.shape;  // a reshape recorded between steps (kohya's magnitudes) changes no bytes
    Result<Tensor> next = step.kind == Rearrangement::Kind::kTranspose2D   ? Transpose2D(cur)
                          : step.kind == Rearrangement::Kind::kPermuteRows ? PermuteRows(cur, *step.order)
                                                                           : ScaleTensor(cur, step.scale);
    if (!next.ok()) return next.error();
    cur = std::move(next.value());
  }
  cur.shape = t.shape;
  return cur;
}

Result<Tensor> DecodeGguf(gguf::TensorType type, const std::vector<uint64_t>& shape, std::span<const uint8_t> bytes) {
  Tensor out{Dtype::F32, shape, {}, std::nullopt};
  const uint64_t n = out.element_count();
  if (n % gguf::BlockElements(type) != 0 || bytes.size() != n / gguf::BlockElements(type) * gguf::BlockBytes(type))
    return MakeError(ErrorCode::InvalidArgument, "internal: " + std::to_string(bytes.size()) + " bytes do not hold " +
                                                     std::to_string(n) + " " + std::string(gguf::TensorTypeName(type)) +
                                                     " elements");
  out.bytes.resize(n * 4);
  gguf::DecodeValues(type, bytes, reinterpret_cast<float*>(out.bytes.data()), n);
  return out;
}

Tensor ScalarF32(float value) {
  Tensor t{Dtype::F32, {}, std::vector<uint8_t>(4)};
  std::memcpy(t.bytes.data(), &value, 4);
  return t;
}

Result<double> ScalarValue(const Tensor& t) {
  if (t.element_count() != 1 || !IsConvertibleFloat(t.dtype))
    return MakeError(ErrorCode::InvalidArgument, "expected a single floating-point value");
  if (!t.held()) return MakeError(ErrorCode::InvalidArgument, "internal: a scalar tensor was not read with the header");
  if (t.dtype == Dtype::F64) {
    double v;
    std::memcpy(&v, t.bytes.data(), 8);
    return v;
  }
  float v;
  kernels::ConvertElements(t.dtype, Dtype::F32, t.bytes.data(), &v, 1);
  return static_cast<double>(v);
}

}  // namespace pb::adapter
