// Peak fp32 arithmetic rate of one core, for the merge benchmark's floor (merge_bench.cc). Two loops, both
// compiled for every Highway target and dispatched like the kernels (so they use the same vector width):
//   PeakFma:    s_c = fma(x, m, s_c) over independent chains (2 flops per lane per instruction);
//   PeakMulAdd: x_c = x_c * m; s_c = s_c + x_c, a separate multiply and add as the merge kernel does
//               (2 flops per lane per pair). The product is kept out of reach of FMA contraction with the
//               same empty-asm barrier as lowrank.cc.
// Enough independent chains to cover latency x throughput (FMA: 4 cycles x 2 per cycle; mul/add: 3 x 2),
// few enough to stay in registers (16 on AVX2, 32 on AVX-512). m is 1.0f loaded from a volatile, so the
// values never overflow, underflow or turn subnormal, and the compiler cannot fold the arithmetic away.
#include <cstddef>
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "peak_flops.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace pb::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kMulAddChains = 12;
#else
constexpr size_t kMulAddChains = 7;
#endif
constexpr size_t kFmaChains = 12;

HWY_INLINE VF Barrier(VF v) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
#if HWY_TARGET <= HWY_AVX3
  asm("" : "+v"(v.raw));
#else
  asm("" : "+x"(v.raw));
#endif
#endif
  return v;
}

// Returns the flops performed; *sink receives a value depending on every chain.
double PeakMulAddImpl(uint64_t iters, float m_in, float* sink) {
  const DF df;
  const VF m = hn::Set(df, m_in);
  VF x[kMulAddChains], s[kMulAddChains];
  for (size_t c = 0; c < kMulAddChains; ++c) {
    x[c] = hn::Set(df, 1e-3f * static_cast<float>(c + 1));
    s[c] = hn::Zero(df);
  }
  for (uint64_t i = 0; i < iters; ++i) {
    HWY_UNROLL(16)  // the chains must stay in registers at any optimization level
    for (size_t c = 0; c < kMulAddChains; ++c) {
      x[c] = Barrier(hn::Mul(x[c], m));
      s[c] = hn::Add(s[c], x[c]);
    }
  }
  VF total = hn::Zero(df);
  for (size_t c = 0; c < kMulAddChains; ++c) total = hn::Add(total, hn::Add(s[c], x[c]));
  *sink = hn::GetLane(total);
  return 2.0 * static_cast<double>(iters) * kMulAddChains * static_cast<double>(hn::Lanes(df));
}

double PeakFmaImpl(uint64_t iters, float m_in, float* sink) {
  const DF df;
  const VF m = hn::Set(df, m_in);
  const VF x = hn::Set(df, 1e-3f);
  VF s[kFmaChains];
  for (size_t c = 0; c < kFmaChains; ++c) s[c] = hn::Set(df, static_cast<float>(c));
  for (uint64_t i = 0; i < iters; ++i) {
    HWY_UNROLL(16)
    for (size_t c = 0; c < kFmaChains; ++c) s[c] = hn::MulAdd(x, m, s[c]);
  }
  VF total = hn::Zero(df);
  for (size_t c = 0; c < kFmaChains; ++c) total = hn::Add(total, s[c]);
  *sink = hn::GetLane(total);
  return 2.0 * static_cast<double>(iters) * kFmaChains * static_cast<double>(hn::Lanes(df));
}

}  // namespace HWY_NAMESPACE
}  // namespace pb::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pb::bench {
HWY_EXPORT(PeakMulAddImpl);
HWY_EXPORT(PeakFmaImpl);

double PeakMulAdd(uint64_t iters, float m, float* sink) { return HWY_DYNAMIC_DISPATCH(PeakMulAddImpl)(iters, m, sink); }
double PeakFma(uint64_t iters, float m, float* sink) { return HWY_DYNAMIC_DISPATCH(PeakFmaImpl)(iters, m, sink); }
}  // namespace pb::bench
#endif
