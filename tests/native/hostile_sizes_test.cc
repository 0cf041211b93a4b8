// Sizes a file declares but does not back: every product of them is checked before it is allocated or multiplied,
// and work stays within the file's own size. Natively and in the WASM build of this suite (where size_t is 32 bits
// and a wrapped product once wrote out of bounds).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "adapter/delta_norm.h"
#include "adapter/gguf_row_order.h"
#include "adapter_fixtures.h"
#include "compose/combine_math.h"
#include "random_matrix.h"

namespace pb {
namespace {

using testing::AddLinear;
using testing::BuildSafetensors;
using testing::GeneratedAdapter;
using testing::GenTensor;
using testing::PeftConfig;

TEST(HostileSizes, ZeroSizeFactorsAreRefusedWhateverRankTheyDeclare) {
  for (uint64_t r : {uint64_t{1} << 16, uint64_t{1} << 40, uint64_t{1} << 62}) {
    std::vector<GenTensor> t = {{"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", Dtype::F32, {r, 0}},
                                {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", Dtype::F32, {0, r}}};
    GeneratedAdapter g{PeftConfig(R"("r": 1, "lora_alpha": 1, "target_modules": ["q_proj"])"), BuildSafetensors(t, 1),
                       std::nullopt};
    auto read = adapter::ReadAdapter(g.source(), {});
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.error().code, ErrorCode::ShapeMismatch);
    EXPECT_EQ(read.error().message, "module `model.layers.0.self_attn.q_proj`: lora_A [" + std::to_string(r) +
                                        ", 0] has a zero-size dimension; a LoRA factor has r >= 1 rows and columns");
  }
}

// r = 40,000 on a 4 x 4 module: the Gram route would hold 2 x 1.6e9 doubles; ΔW itself is 16 values.
TEST(HostileSizes, DeltaNormOfARankAboveTheFeaturesIsComputedFromDeltaW) {
  const uint64_t r = 40000, in = 4, out = 3;
  // F32 factors (what ‖ΔW‖ reads them as); the matrices hold the same values, rounded to float.
  auto rounded = [](linalg::Matrix m) {
    for (double& x : m.data()) x = static_cast<float>(x);
    return m;
  };
  linalg::Matrix a = rounded(testing::RandomMatrix(r, in, 1)), b = rounded(testing::RandomMatrix(out, r, 2));
  adapter::Tensor ta{Dtype::F32, {r, in}, {}, std::nullopt}, tb{Dtype::F32, {out, r}, {}, std::nullopt};
  auto bytes = [](const linalg::Matrix& m) {
    std::vector<uint8_t> v(m.data().size() * 4);
    for (size_t i = 0; i < m.data().size(); ++i) {
      const float f = static_cast<float>(m.data()[i]);
      std::memcpy(&v[i * 4], &f, 4);
    }
    return v;
  };
  ta.bytes = bytes(a);
  tb.bytes = bytes(b);
  const linalg::Matrix delta = linalg::Multiply(b, a);
  const double expected = 0.5 * std::sqrt(linalg::FrobeniusDot(delta, delta));
  const auto start = std::chrono::steady_clock::now();
  const double got = adapter::DeltaFrobeniusNorm(ta, tb, r, 0.5, 1);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_NEAR(got, expected, 1e-12 * expected);
  // And a small rank still takes the Gram route to the same value as ΔW.
  linalg::Matrix a2 = rounded(testing::RandomMatrix(3, 50, 3)), b2 = rounded(testing::RandomMatrix(40, 3, 4));
  adapter::Tensor ta2{Dtype::F32, {3, 50}, bytes(a2), std::nullopt}, tb2{Dtype::F32, {40, 3}, bytes(b2), std::nullopt};
  const linalg::Matrix d2 = linalg::Multiply(b2, a2);
  EXPECT_NEAR(adapter::DeltaFrobeniusNorm(ta2, tb2, 3, 1.0, 1), std::sqrt(linalg::FrobeniusDot(d2, d2)), 1e-12);
}

// Head counts near 2^64: products and sums of them wrapped (SIGFPE natively, "remainder by zero" in WASM, a
// 3n-wrap table of 2.4 GB); each is a precise refusal now.
TEST(HostileSizes, HeadCountsWhoseProductsWrapAreRefused) {
  using adapter::GgufRowOrder;
  using adapter::HeadCountField;
  using adapter::RowPermutationKind;
  const uint64_t huge = uint64_t{1} << 63, third = 6148914691236517206ull;  // 3 * third wraps to 2
  for (auto [kind, rows, heads, kv] : std::vector<std::tuple<RowPermutationKind, uint64_t, uint64_t, uint64_t>>{
           {RowPermutationKind::kLlamaRope, 8, huge, 0},
           {RowPermutationKind::kLlamaRope, 8, 2, huge},
           {RowPermutationKind::kFalconQkv, 8, huge, huge},
           {RowPermutationKind::kFalconQkv, 8, 2, huge / 2 + 1},
           {RowPermutationKind::kFalconQkv, 6, 2, (uint64_t{0} - 2) / 2 + 1},
           {RowPermutationKind::kGptNeoxQkv, 6, third, 0},
           {RowPermutationKind::kGptNeoxQkv, 8, huge, 0}}) {
    auto order = GgufRowOrder({kind, HeadCountField::kKeyValueHeads}, rows, heads, kv);
    ASSERT_FALSE(order.ok()) << "heads " << heads << " kv " << kv;
    EXPECT_EQ(order.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(order.error().message.find("cannot reorder " + std::to_string(rows) + " rows"), std::string::npos);
  }
  // No rows: an empty order, even where heads + 2 * kv_heads wraps to 0 (2^63 + 2 * 2^62).
  auto empty = GgufRowOrder({RowPermutationKind::kFalconQkv, HeadCountField::kAttentionHeads}, 0, huge, huge / 2);
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_TRUE(empty->empty());
  // What divides still reorders.
  auto ok = GgufRowOrder({RowPermutationKind::kFalconQkv, HeadCountField::kAttentionHeads}, 8, 2, 1);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), 8u);
}

// combine's error report at ranks above the features: (Σr + rank)² values on the Gram route, out × in on the dense
// one; both routes give the same error where both are small enough to run.
TEST(HostileSizes, CombineErrorAtRanksAboveTheFeaturesNeedsOnlyDeltaW) {
  auto term = [](size_t r, size_t out, size_t in, double w, uint64_t seed) {
    compose::Term t;
    t.a = testing::RandomMatrix(r, in, seed);
    t.b = testing::RandomMatrix(out, r, seed + 7);
    t.weight = w;
    t.scaling = 1;
    return t;
  };
  std::vector<compose::Term> terms = {term(3000, 4, 5, 0.5, 1), term(2000, 4, 5, -1, 2)};
  linalg::Matrix exact(4, 5);
  for (const auto& t : terms) {
    const linalg::Matrix d = linalg::Multiply(t.b, t.a);
    for (size_t i = 0; i < d.data().size(); ++i) exact.data()[i] += t.weight * d.data()[i];
  }
  for (uint64_t rank : {4, 2}) {
    auto combined = compose::CombineModule(terms, {compose::CombineMethod::kSvd, rank});
    ASSERT_TRUE(combined.ok()) << combined.error().message;
    const linalg::Matrix written = linalg::Multiply(combined->b, combined->a);
    double diff2 = 0;
    for (size_t i = 0; i < written.data().size(); ++i) diff2 += std::pow(exact.data()[i] - written.data()[i], 2);
    const double expected = std::sqrt(diff2 / linalg::FrobeniusDot(exact, exact));
    const auto start = std::chrono::steady_clock::now();
    const double got = compose::RelativeError(terms, combined->a, combined->b, 1.0, false);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
    EXPECT_NEAR(got, expected, 1e-9);
    if (rank == 4) EXPECT_LT(got, 1e-9);  // rank 4 holds the whole 4 x 5 delta
    else EXPECT_GT(got, 1e-3);
  }
}

}  // namespace
}  // namespace pb
