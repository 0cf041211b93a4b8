#include "adapter/delta_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/convert.h"

namespace pb::adapter {

namespace {

std::vector<double> AsDouble(const Tensor& t) {
  std::vector<float> f(t.element_count());
  kernels::ConvertElements(t.dtype, Dtype::F32, t.bytes.data(), f.data(), f.size());
  return std::vector<double>(f.begin(), f.end());
}

}  // namespace

double DeltaFrobeniusNorm(const LoraModule& m) {
  return DeltaFrobeniusNorm(m.a, m.b, m.rank(), m.settings.scaling, m.experts ? m.experts->num_experts : 1);
}

double DeltaFrobeniusNorm(const Tensor& a_tensor, const Tensor& b_tensor, uint64_t rank, double scaling,
                          uint64_t experts) {
  const size_t r = rank, n_experts = experts;
  if (r == 0 || n_experts == 0) return 0;
  const std::vector<double> a = AsDouble(a_tensor), b = AsDouble(b_tensor);
  const size_t a_cols = a.size() / (r * n_experts);  // A is [r·E, in (* kernel)]
  const size_t b_cols = r * n_experts;
  const size_t b_rows = b.size() / b_cols;  // B is [out, r·E (* 1...)]
  double sum = 0;
  // Expert e: A's rows e·r + i, B's columns i·E + e (PEFT's ParamWrapper layout; E = 1 is plain LoRA), and
  // ‖ΔW‖² sums over the experts. Through the r × r Gram matrices when r is small against the weight, else from
  // ΔW itself: the smaller of r² and out·in is never more than a factor's elements, so neither memory nor work
  // grows with a rank that exceeds the module's features (r = 40,000 on a 4 × 4 module is 16 values, not 1.6e9).
  const bool through_gram = static_cast<uint64_t>(r) <= static_cast<uint64_t>(a_cols) * b_rows / r;
  for (size_t e = 0; e < n_experts; ++e) {
    if (!through_gram) {
      std::vector<double> row(a_cols);
      for (size_t o = 0; o < b_rows; ++o) {
        std::fill(row.begin(), row.end(), 0.0);
        for (size_t i = 0; i < r; ++i) {
          const double bi = b[o * b_cols + i * n_experts + e];
          const double* ai = &a[(e * r + i) * a_cols];
          for (size_t c = 0; c < a_cols; ++c) row[c] += bi * ai[c];
        }
        for (double v : row) sum += v * v;
      }
      continue;
    }
    std::vector<double> ga(r * r, 0.0), gb(r * r, 0.0);
    for (size_t i = 0; i < r; ++i)
      for (size_t j = i; j < r; ++j) {
        double s = 0;
        const double* ai = &a[(e * r + i) * a_cols];
        const double* aj = &a[(e * r + j) * a_cols];
        for (size_t c = 0; c < a_cols; ++c) s += ai[c] * aj[c];
        ga[i * r + j] = ga[j * r + i] = s;
      }
    for (size_t row = 0; row < b_rows; ++row)
      for (size_t i = 0; i < r; ++i) {
        const double bi = b[row * b_cols + i * n_experts + e];
        for (size_t j = i; j < r; ++j) gb[i * r + j] += bi * b[row * b_cols + j * n_experts + e];
      }
    for (size_t i = 0; i < r; ++i)
      for (size_t j = i; j < r; ++j) sum += (i == j ? 1.0 : 2.0) * gb[i * r + j] * ga[i * r + j];
  }
  return std::fabs(scaling) * std::sqrt(std::max(sum, 0.0));
}

DeltaNormPass::DeltaNormPass(const Adapter& adapter) : adapter_(adapter) { Advance(); }

void DeltaNormPass::Advance() {
  while (next_ < adapter_.modules.size()) {
    const LoraModule& m = adapter_.modules[next_];
    if (!requested_) {
      fetch_.Request({&m.a, &m.b});
      requested_ = true;
    }
    if (!fetch_.ready()) return;
    norms_.push_back(DeltaFrobeniusNorm(*fetch_.get(0), *fetch_.get(1), m.rank(), m.settings.scaling,
                                        m.experts ? m.experts->num_experts : 1));
    fetch_.Release();
    requested_ = false;
    ++next_;
  }
}

Status DeltaNormPass::SupplyAdapter(std::span<const uint8_t> bytes) {
  if (done()) return MakeError(ErrorCode::InvalidArgument, "adapter bytes that were not asked for");
  PB_RETURN_IF_ERROR(fetch_.Supply(bytes));
  Advance();
  return Status::Ok();
}

}  // namespace pb::adapter
