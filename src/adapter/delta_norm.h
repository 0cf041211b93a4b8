// The size of each module's update, ‖ΔW‖_F = |s|·‖B·A‖_F, without forming ΔW: with G_B = BᵀB and G_A = A·Aᵀ
// (both r x r), ‖B·A‖_F² = trace(Aᵀ BᵀB A) = Σ_ij (G_B)_ij (G_A)_ij. Cost O((in + out)·r²), not O(in·out·r),
// so the web page's per-layer chart and adapter-info can show it for any model size.
#pragma once

#include "adapter/adapter.h"
#include "adapter/tensor_fetch.h"

namespace pb::adapter {

// |scaling| * ||B A||_F in double (conv factors flattened to [r, in*k] and [out, r]; embeddings likewise; LoRA on
// fused experts: the norm of the whole [E, out, in] delta, A [r·E, in] and B [out, r·E] in PEFT's layout).
// The factors must be held.
double DeltaFrobeniusNorm(const LoraModule& module);
double DeltaFrobeniusNorm(const Tensor& a, const Tensor& b, uint64_t rank, double scaling, uint64_t experts = 1);

// ‖ΔW‖ of every module of an adapter whose factors may be references: module by module, each one's A and B
// fetched, used and released, so only one module's factors are held at a time.
class DeltaNormPass final : public AdapterBytesConsumer {
 public:
  explicit DeltaNormPass(const Adapter& adapter);  // computes right away up to the first referenced module
  std::span<const ByteRange> adapter_needs() const override { return fetch_.needs(); }
  Status SupplyAdapter(std::span<const uint8_t> bytes) override;
  bool done() const { return next_ == adapter_.modules.size(); }
  const std::vector<double>& norms() const { return norms_; }  // per module, once done
  uint64_t peak_adapter_bytes() const { return fetch_.peak_bytes(); }

 private:
  void Advance();
  const Adapter& adapter_;
  TensorFetch fetch_;
  std::vector<double> norms_;
  size_t next_ = 0;
  bool requested_ = false;
};

}  // namespace pb::adapter
