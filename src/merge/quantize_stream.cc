#include "merge/quantize_stream.h"

#include <algorithm>
#include <cmath>

#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "merge/quantize_plan.h"

namespace pb::merge {

namespace {

kernels::QuantType TypeOf(QuantMethod m) {
  switch (m) {
    case QuantMethod::kFp8: return kernels::QuantType::kFp8E4M3;
    case QuantMethod::kInt8: return kernels::QuantType::kInt8;
    default: return kernels::QuantType::kInt4;
  }
}

}  // namespace

double QuantError::rms() const { return count ? std::sqrt(sum_sq_err / static_cast<double>(count)) : 0.0; }
double QuantError::relative() const { return sum_sq_ref > 0 ? std::sqrt(sum_sq_err / sum_sq_ref) : 0.0; }

QuantizedTensorWriter::QuantizedTensorWriter(const PlannedTensor& p, const QuantizeOptions& options,
                                             StreamingWriter& writer)
    : p_(p), options_(options), writer_(writer) {
  error_.tensor = p.name;
}

Status QuantizedTensorWriter::Rows(const uint8_t* rows, size_t n) {
  const size_t cols = p_.cols;
  if (options_.scheme != QuantScheme::kBlock) {
    x_.resize(n * cols);
    kernels::ConvertElements(p_.out_dtype, Dtype::F32, rows, x_.data(), n * cols);
    return Quantize(x_.data(), n);
  }
  // Fine-grained FP8: whole bands of 128 rows, each block's scale needs all of them.
  band_.resize(kFp8BlockSize * cols);
  while (n > 0) {
    const size_t take = std::min<size_t>(n, kFp8BlockSize - band_rows_);
    kernels::ConvertElements(p_.out_dtype, Dtype::F32, rows, band_.data() + band_rows_ * cols, take * cols);
    rows += take * cols * (DtypeBits(p_.out_dtype) / 8);
    band_rows_ += take;
    n -= take;
    if (band_rows_ == kFp8BlockSize) {
      PB_RETURN_IF_ERROR(Quantize(band_.data(), band_rows_));
      band_rows_ = 0;
    }
  }
  return Status::Ok();
}

Status QuantizedTensorWriter::Quantize(const float* x, size_t n) {
  const size_t cols = p_.cols;
  const kernels::QuantType type = TypeOf(options_.method);
  const Dtype t = p_.out_dtype;
  q_.resize(n * cols);
  dequantized_.resize(n * cols);
  if (options_.scheme == QuantScheme::kBlock) {
    const size_t blocks = cols / kFp8BlockSize;
    std::vector<float> inv(blocks);
    if (!kernels::QuantizeFp8Blocks(x, n, cols, kFp8BlockSize, q_.data(), inv.data()))
      return MakeError(ErrorCode::InvalidArgument, "cannot quantize `" + p_.name + "` in 128 x 128 blocks", p_.name);
    const auto* bytes = reinterpret_cast<const uint8_t*>(inv.data());
    scales_.insert(scales_.end(), bytes, bytes + blocks * sizeof(float));  // little-endian hosts (x86, WASM)
    row_scales_.resize(n * blocks);
    for (size_t r = 0; r < n; ++r) std::copy(inv.begin(), inv.end(), row_scales_.begin() + r * blocks);
    kernels::DequantizeSymmetric(q_.data(), row_scales_.data(), n, cols, kFp8BlockSize, type, t, dequantized_.data());
    Measure(x, dequantized_.data(), n);
    return writer_.Write(q_);
  }
  const size_t group = options_.scheme == QuantScheme::kGroup ? options_.group_size : cols;
  const size_t groups = cols / group, width = DtypeBits(t) / 8;
  const size_t at = scales_.size();
  scales_.resize(at + n * groups * width);
  if (!kernels::QuantizeSymmetric(x, n, cols, group, type, t, q_.data(), scales_.data() + at))
    return MakeError(ErrorCode::InvalidArgument, "cannot quantize `" + p_.name + "`", p_.name);
  row_scales_.resize(n * groups);
  kernels::ConvertElements(t, Dtype::F32, scales_.data() + at, row_scales_.data(), n * groups);
  kernels::DequantizeSymmetric(q_.data(), row_scales_.data(), n, cols, group, type, t, dequantized_.data());
  Measure(x, dequantized_.data(), n);
  if (type == kernels::QuantType::kFp8E4M3) return writer_.Write(q_);
  const int bits = kernels::QuantBits(type);
  packed_.resize(n * kernels::PackedWords(cols, bits) * 4);
  kernels::PackInt32(reinterpret_cast<const int8_t*>(q_.data()), n, cols, bits, packed_.data());
  return writer_.Write(packed_);
}

void QuantizedTensorWriter::Measure(const float* x, const float* dequantized, size_t n) {
  const size_t count = n * p_.cols;
  for (size_t i = 0; i < count; ++i) {
    const double ref = x[i], err = static_cast<double>(dequantized[i]) - ref;
    error_.max_abs = std::max(error_.max_abs, std::fabs(err));
    error_.sum_sq_err += err * err;
    error_.sum_sq_ref += ref * ref;
  }
  error_.count += count;
}

Status QuantizedTensorWriter::Finish() {
  if (band_rows_ > 0) {
    PB_RETURN_IF_ERROR(Quantize(band_.data(), band_rows_));
    band_rows_ = 0;
  }
  PB_RETURN_IF_ERROR(writer_.Write(scales_));
  scales_ = {};
  if (p_.quantized->shape.empty()) return Status::Ok();
  uint8_t shape[16];
  const uint64_t dims[2] = {p_.rows, p_.cols};
  for (int d = 0; d < 2; ++d)
    for (int b = 0; b < 8; ++b) shape[d * 8 + b] = static_cast<uint8_t>(dims[d] >> (8 * b));
  return writer_.Write({shape, sizeof shape});
}

}  // namespace pb::merge
