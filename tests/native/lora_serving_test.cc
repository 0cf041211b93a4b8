// compose/lora_serving.h (the adapter cache's rules): module names, the one span of a module's factors, the
// conversion, the cat composition against a float64 sum, and ApplyTerms against a dense reference and the kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "compose/float_values.h"
#include "compose/lora_serving.h"
#include "kernels/convert.h"

namespace pb::compose {
namespace {

std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> Values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = (float((x >> 8) & 0xFFFF) / 65536.0f - 0.5f) * 0.1f;
  }
  return v;
}

// A module whose factors are references into a file: A at [100, 100 + 4·r·in), B right after.
adapter::LoraModule RefModule(const std::string& path, uint64_t r, uint64_t in, uint64_t out) {
  adapter::LoraModule m;
  m.path = path;
  m.a.dtype = m.b.dtype = Dtype::F32;
  m.a.shape = {r, in};
  m.b.shape = {out, r};
  m.a.ref = adapter::TensorRef{{100, 100 + 4 * r * in}, {r, in}, {}, {}};
  m.b.ref = adapter::TensorRef{{100 + 4 * r * in, 100 + 4 * r * in + 4 * out * r}, {out, r}, {}, {}};
  m.settings = {int64_t(r), 2.0 * r, 2.0, {}, {}};
  return m;
}

TEST(LoraServing, NamesSpanAndConversion) {
  adapter::Adapter a;
  a.modules.push_back(RefModule("model.layers.0.self_attn.q_proj", 2, 3, 4));
  for (const char* name : {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.q_proj.weight",
                           "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"}) {
    auto m = ServedModule(a, name, "sql");
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_EQ(m.value(), &a.modules[0]);
  }
  auto missing = ServedModule(a, "model.layers.1.self_attn.q_proj", "sql");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(missing.error().message.find("sql has no LoRA module `model.layers.1.self_attn.q_proj`"),
            std::string::npos);

  const auto span = ModuleSpan(a.modules[0]);
  EXPECT_EQ(span.begin, 100u);
  EXPECT_EQ(span.end, 100u + 4 * (6 + 8));
  EXPECT_EQ(ServedBytes(a.modules[0], Dtype::BF16), 2u * 14);

  const auto av = Values(6, 1), bv = Values(8, 2);
  std::vector<uint8_t> bytes = F32Bytes(av);
  const auto bb = F32Bytes(bv);
  bytes.insert(bytes.end(), bb.begin(), bb.end());
  auto f = FactorsFromSpan(a.modules[0], bytes, Dtype::BF16);
  ASSERT_TRUE(f.ok()) << f.error().message;
  std::vector<uint8_t> expect(12);
  ASSERT_TRUE(kernels::ConvertElements(Dtype::F32, Dtype::BF16, av.data(), expect.data(), 6));
  EXPECT_EQ(f->a, expect);
  EXPECT_EQ(f->b_shape, (std::vector<uint64_t>{4, 2}));
  EXPECT_FALSE(FactorsFromSpan(a.modules[0], std::span<const uint8_t>(bytes).subspan(1), Dtype::F32).ok());

  a.modules[0].magnitude = adapter::Tensor{};
  auto dora = ServedModule(a, "model.layers.0.self_attn.q_proj", "sql");
  ASSERT_FALSE(dora.ok());
  EXPECT_EQ(dora.error().code, ErrorCode::UnsupportedAdapter);
}

ServedFactors Factors(uint64_t r, uint64_t in, uint64_t out, uint32_t seed) {
  return {Dtype::F32, F32Bytes(Values(r * in, seed)), F32Bytes(Values(out * r, seed + 7)), {r, in}, {out, r}};
}

float At(const std::vector<uint8_t>& b, size_t i) {
  float f;
  std::memcpy(&f, b.data() + 4 * i, 4);
  return f;
}

TEST(LoraServing, ComposeCatIsTheWeightedSum) {
  const uint64_t in = 9, out = 7;
  ServedFactors f1 = Factors(3, in, out, 1), f2 = Factors(5, in, out, 2);
  std::vector<ServedTerm> terms = {{&f1, 0.7, 2.0}, {&f2, -0.3, 8 / std::sqrt(5.0)}};
  auto c = ComposeCat(terms, Dtype::F32);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->a_shape, (std::vector<uint64_t>{8, in}));
  EXPECT_EQ(c->b_shape, (std::vector<uint64_t>{out, 8}));
  double num = 0, den = 0;
  for (uint64_t i = 0; i < out; ++i)
    for (uint64_t j = 0; j < in; ++j) {
      double ref = 0, got = 0;
      for (const auto& t : terms) {
        const uint64_t r = t.factors->a_shape[0];
        double s = 0;
        for (uint64_t k = 0; k < r; ++k) s += double(At(t.factors->b, i * r + k)) * At(t.factors->a, k * in + j);
        ref += t.weight * t.scaling * s;
      }
      for (uint64_t k = 0; k < 8; ++k) got += double(At(c->b, i * 8 + k)) * At(c->a, k * in + j);
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  EXPECT_LT(std::sqrt(num / den), 1e-7);
  ServedFactors bad = Factors(3, in + 1, out, 3);
  std::vector<ServedTerm> mismatched = {{&f1, 1, 1}, {&bad, 1, 1}};
  EXPECT_EQ(ComposeCat(mismatched, Dtype::F32).error().code, ErrorCode::ShapeMismatch);
}

TEST(LoraServing, CompositionsAreBoundedBeforeAnyWork) {
  const uint64_t in = 9, out = 7;
  ServedFactors f = Factors(3, in, out, 1);
  // The default bound on terms: a request naming one adapter 17 times is refused, 16 times is composed.
  std::vector<ServedTerm> many(17, ServedTerm{&f, 1, 1});
  auto refused = ComposeCat(many, Dtype::F32);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(refused.error().message, "a composition of 17 adapters: at most 16 may be composed at once (maxTerms)");
  many.pop_back();
  ASSERT_TRUE(ComposeCat(many, Dtype::F32).ok());
  // Rank and bytes: LimitExceeded, checked before the composition is computed.
  CompositionLimits small;
  small.max_rank = 5;
  std::vector<ServedTerm> two(2, ServedTerm{&f, 1, 1});
  auto rank = ComposeCat(two, Dtype::F32, 0, small);
  ASSERT_FALSE(rank.ok());
  EXPECT_EQ(rank.error().code, ErrorCode::LimitExceeded);
  EXPECT_EQ(rank.error().message, "the composed module would have rank 6, more than the limit of 5 (maxRank)");
  EXPECT_EQ(ComposeCat(two, Dtype::F32, 8, CompositionLimits{.max_rank = 7}).error().code, ErrorCode::LimitExceeded);
  CompositionLimits bytes;
  bytes.max_bytes = 6 * (in + out) * 2 - 1;  // one byte short of rank 6 in bf16
  auto big = ComposeCat(two, Dtype::BF16, 0, bytes);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::LimitExceeded);
  EXPECT_EQ(big.error().message,
            "the composed module would be 192 bytes, more than the limit of 191 bytes (maxComposeBytes)");
  bytes.max_bytes += 1;
  EXPECT_TRUE(ComposeCat(two, Dtype::BF16, 0, bytes).ok());
  EXPECT_EQ(CheckCompositionTerms(0, {}).error().code, ErrorCode::InvalidArgument);
  EXPECT_TRUE(CheckComposition(16, 1024, 1ull << 30, "x", {}).ok());
  EXPECT_EQ(CheckComposition(16, 1024, (1ull << 30) + 1, "x", {}).error().code, ErrorCode::LimitExceeded);
}

TEST(LoraServing, ApplyTermsAddsTheDeltaInEveryLayout) {
  const uint64_t in = 6, out = 4;
  ServedFactors f1 = Factors(2, in, out, 4), f2 = Factors(3, in, out, 5);
  const auto w = Values(out * in, 9);
  for (WeightLayout layout : {WeightLayout::kOutIn, WeightLayout::kInOut}) {
    const bool t = layout == WeightLayout::kInOut;
    std::vector<ServedTerm> terms = {{&f1, 1, 2.0}, {&f2, 0.5, 0.25}};
    auto merged = ApplyTerms(terms, F32Bytes(w), Dtype::F32,
                             t ? std::vector<uint64_t>{in, out} : std::vector<uint64_t>{out, in}, Dtype::F32, layout);
    ASSERT_TRUE(merged.ok()) << merged.error().message;
    for (uint64_t i = 0; i < out; ++i)
      for (uint64_t j = 0; j < in; ++j) {
        double d = 0;
        for (const auto& term : terms) {
          const uint64_t r = term.factors->a_shape[0];
          for (uint64_t k = 0; k < r; ++k)
            d += term.weight * term.scaling * At(term.factors->b, i * r + k) * At(term.factors->a, k * in + j);
        }
        const size_t at = t ? j * out + i : i * in + j;
        EXPECT_NEAR(At(merged.value(), at), w[at] + d, 1e-6);
      }
  }
  std::vector<ServedTerm> one = {{&f1, 1, 2.0}};
  EXPECT_EQ(AutoLayout(f1, false, {out, in}), WeightLayout::kOutIn);
  EXPECT_EQ(AutoLayout(f1, false, {in, out}), WeightLayout::kInOut);
  EXPECT_EQ(AutoLayout(f1, true, {in, out}), WeightLayout::kEmbedding);
  EXPECT_EQ(ApplyTerms(one, F32Bytes(w), Dtype::F32, {out + 1, in}, Dtype::F32, WeightLayout::kOutIn).error().code,
            ErrorCode::ShapeMismatch);
}

}  // namespace
}  // namespace pb::compose
