// `--quantize` while streaming: one weight's rows (merged, in the model dtype) in, its quantized layout out
// (merge/quantize_plan.h), with the dequantization error measured on the way.
//
// Memory: the rows of one push, in fp32, plus the tensor's scales (written after the quantized values; at most
// 1/64 of the weight's own bytes for 128-column groups) and, for fine-grained FP8, one band of 128 rows in fp32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/writer.h"
#include "merge/merge_plan.h"

namespace pb::merge {

// The error of dequantize(quantize(W)) against W (the merged weight in the model dtype), over one tensor.
struct QuantError {
  std::string tensor;
  double max_abs = 0;     // max |W' - W|
  double sum_sq_err = 0;  // Σ (W' - W)²
  double sum_sq_ref = 0;  // Σ W²
  uint64_t count = 0;
  double rms() const;       // sqrt(Σ (W' - W)² / n)
  double relative() const;  // ‖W' - W‖ / ‖W‖ (0 for a zero weight)
};

class QuantizedTensorWriter {
 public:
  // p.quantized must be set; p.rows x p.cols values of p.out_dtype come in.
  QuantizedTensorWriter(const PlannedTensor& p, const QuantizeOptions& options, StreamingWriter& writer);
  // `n` whole rows, p.out_dtype little-endian.
  Status Rows(const uint8_t* rows, size_t n);
  // After the last row: a partial band (fine-grained FP8), then the scales, then the shape.
  Status Finish();
  const QuantError& error() const { return error_; }

 private:
  Status Quantize(const float* x, size_t n);  // n rows in fp32
  void Measure(const float* x, const float* dequantized, size_t n);
  const PlannedTensor& p_;
  const QuantizeOptions& options_;
  StreamingWriter& writer_;
  QuantError error_;
  std::vector<float> x_, band_, row_scales_, dequantized_;
  std::vector<uint8_t> q_, packed_, scales_;
  size_t band_rows_ = 0;
};

}  // namespace pb::merge
