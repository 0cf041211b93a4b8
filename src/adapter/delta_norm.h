// The size of each module's update, ‖ΔW‖_F = |s|·‖B·A‖_F, without forming ΔW: with G_B = BᵀB and G_A = A·Aᵀ
// (both r x r), ‖B·A‖_F² = trace(Aᵀ BᵀB A) = Σ_ij (G_B)_ij (G_A)_ij. Cost O((in + out)·r²), not O(in·out·r),
// so the web page's per-layer chart and adapter-info can show it for any model size.
#pragma once

#include "adapter/adapter.h"

namespace pb::adapter {

// |scaling| * ||B A||_F in double (conv factors flattened to [r, in*k] and [out, r]; embeddings likewise).
double DeltaFrobeniusNorm(const LoraModule& module);

}  // namespace pb::adapter
