// compose/: the combination maths against dense references, the Gram-matrix error against the dense one, and
// the plan's refusals.
#include <gtest/gtest.h>

#include "random_matrix.h"
#include "test_util.h"

#include <cmath>
#include <cstring>

#include "compose/combine_math.h"
#include "compose/combine_plan.h"
#include "compose/combine_writer.h"
#include "core/header.h"
#include "compose/float_values.h"
#include "linalg/svd.h"

namespace pb::compose {
namespace {

using linalg::Matrix;

Matrix Random(size_t rows, size_t cols, uint64_t seed) { return testing::RandomMatrix(rows, cols, seed); }

Term MakeTerm(size_t r, size_t out, size_t in, double weight, double scaling, uint64_t seed) {
  Term t;
  t.a = Random(r, in, seed);
  t.b = Random(out, r, seed + 100);
  t.weight = weight;
  t.scaling = scaling;
  return t;
}

Matrix Exact(const std::vector<Term>& terms) {
  Matrix sum(terms[0].b.rows(), terms[0].a.cols());
  for (const Term& t : terms) {
    Matrix d = linalg::Multiply(t.b, t.a);
    for (size_t i = 0; i < d.data().size(); ++i) sum.data()[i] += t.weight * t.scaling * d.data()[i];
  }
  return sum;
}

double Norm(const Matrix& m) { return std::sqrt(linalg::FrobeniusDot(m, m)); }

Matrix Minus(const Matrix& a, const Matrix& b) {
  Matrix d = a;
  for (size_t i = 0; i < d.data().size(); ++i) d.data()[i] -= b.data()[i];
  return d;
}

TEST(Combine, CatIsTheExactWeightedSumForMixedRanksAndNegativeWeights) {
  std::vector<Term> terms = {MakeTerm(4, 12, 9, 0.7, 2.0, 1), MakeTerm(2, 12, 9, -1.5, 0.25, 2),
                             MakeTerm(3, 12, 9, 1, 4, 3)};
  auto c = CombineModule(terms, {CombineMethod::kCat, 12});
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->a.rows(), 12u);  // padded to the rank asked (zero rows 9..11)
  Matrix got = linalg::Multiply(c->b, c->a);
  EXPECT_LT(Norm(Minus(got, Exact(terms))) / Norm(Exact(terms)), 1e-14);
  EXPECT_LT(RelativeError(terms, c->a, c->b, 1.0, true), 1e-15);  // exact in double
  EXPECT_LT(RelativeError(terms, c->a, c->b, 1.0, false), 1e-12);
  // Rounded to float32 the error is a few 1e-8: the cat-form difference measures it as the dense one does, where
  // Gram sums would be noise.
  Combined rounded = c.value();
  RoundAll(rounded.a, Dtype::F32);
  RoundAll(rounded.b, Dtype::F32);
  const double dense = Norm(Minus(linalg::Multiply(rounded.b, rounded.a), Exact(terms))) / Norm(Exact(terms));
  ASSERT_GT(dense, 1e-9);
  EXPECT_NEAR(RelativeError(terms, rounded.a, rounded.b, 1.0, true), dense, 1e-6 * dense);
  EXPECT_NEAR(RelativeError(terms, rounded.a, rounded.b, 1.0, false), dense, 1e-3 * dense);  // the QR fallback
}

TEST(Combine, TheGramErrorEqualsTheDenseError) {
  std::vector<Term> terms = {MakeTerm(3, 10, 7, 1, 1, 4), MakeTerm(3, 10, 7, 0.5, 2, 5)};
  Matrix a = Random(4, 7, 9), b = Random(10, 4, 10);
  for (double scale : {1.0, 2.0}) {
    Matrix applied = linalg::Multiply(b, a);
    for (double& x : applied.data()) x *= scale;
    const double dense = Norm(Minus(applied, Exact(terms))) / Norm(Exact(terms));
    EXPECT_NEAR(RelativeError(terms, a, b, scale, false), dense, 1e-12);
  }
}

TEST(Combine, SvdKeepsTheOptimalRankKPartAndSaysHowMuchEnergy) {
  std::vector<Term> terms = {MakeTerm(4, 16, 11, 1, 1, 6), MakeTerm(4, 16, 11, -0.5, 2, 7)};
  const Matrix exact = Exact(terms);
  linalg::Svd full = linalg::JacobiSvd(exact);
  for (uint64_t k : {3u, 5u, 8u}) {
    auto c = CombineModule(terms, {CombineMethod::kSvd, k});
    ASSERT_TRUE(c.ok());
    double tail = 0, all = 0;
    for (size_t i = 0; i < full.s.size(); ++i) (i >= k ? tail : all) += full.s[i] * full.s[i];
    all += tail;
    // Eckart–Young: the best rank-k error is the tail of the spectrum.
    EXPECT_NEAR(RelativeError(terms, c->a, c->b, 1.0, false), std::sqrt(tail / all), 1e-9) << k;
    EXPECT_NEAR(*c->kept_energy, 1 - tail / all, 1e-12) << k;
  }
}

TEST(Combine, TiesElectsTheMajoritySignAndAveragesTheAgreeingValues) {
  // r = 1 factors with B = [1]: A's result is ties over the A rows, weights √(w·s) = 1.
  Term t1, t2;
  t1.a = Matrix(1, 3), t2.a = Matrix(1, 3);
  t1.a.data() = {1, -2, 0.5};
  t2.a.data() = {-1, -1, 2};
  t1.b = Matrix(1, 1), t2.b = Matrix(1, 1);
  t1.b.data() = {1}, t2.b.data() = {1};
  ModuleMath math{CombineMethod::kTies, 1, 1.0};
  auto c = CombineModule({t1, t2}, math);
  ASSERT_TRUE(c.ok());
  // Sums 0, -3, 2.5: signs +, -, + (a zero sum elects +); 1 agrees alone, -2 and -1 average, 0.5 and 2 average.
  EXPECT_EQ(c->a.data(), (std::vector<double>{1, -1.5, 1.25}));
  EXPECT_EQ(c->b.data(), (std::vector<double>{1}));
  math.majority_sign = MajoritySign::kFrequency;  // sign counts 0, -2, +2: the same election here
  EXPECT_EQ(CombineModule({t1, t2}, math)->a.data(), (std::vector<double>{1, -1.5, 1.25}));
}

TEST(Combine, MagnitudePruneKeepsTheLargestAndDareIsSeeded) {
  Term t = MakeTerm(2, 3, 5, 1, 1, 8);
  Term u = MakeTerm(2, 3, 5, 1, 1, 9);
  auto pruned = CombineModule({t, u}, {CombineMethod::kMagnitudePrune, 2, 0.5});
  ASSERT_TRUE(pruned.ok());
  ModuleMath dare{CombineMethod::kDareLinear, 2, 0.5};
  dare.seed = 11;
  auto x = CombineModule({t, u}, dare), y = CombineModule({t, u}, dare);
  EXPECT_EQ(x->a.data(), y->a.data());
  dare.seed = 12;
  EXPECT_NE(CombineModule({t, u}, dare)->a.data(), x->a.data());
}

adapter::Adapter OneModuleAdapter(uint64_t r, uint64_t out, uint64_t in, bool dora) {
  adapter::Adapter a;
  adapter::LoraModule m;
  m.path = "model.layers.0.self_attn.q_proj";
  m.a.shape = {r, in};
  m.a.bytes.assign(r * in * 4, 0);
  m.b.shape = {out, r};
  m.b.bytes.assign(out * r * 4, 0);
  m.settings = {static_cast<int64_t>(r), static_cast<double>(r), 1.0, std::nullopt, std::nullopt};
  if (dora) {
    adapter::Tensor mag;
    mag.shape = {out};
    mag.bytes.assign(out * 4, 0);
    m.magnitude = mag;
  }
  a.modules.push_back(m);
  a.config.r = static_cast<int64_t>(r);
  a.config.document = Json::object();
  return a;
}

TEST(CombinePlan, RefusesWhatNoMethodExpressesListingTheModules) {
  adapter::Adapter plain = OneModuleAdapter(4, 8, 8, false), dora = OneModuleAdapter(4, 8, 8, true);
  auto refused = PlanCombine({{"x", &plain}, {"y", &dora}}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::UnsupportedAdapter);
  EXPECT_NE(refused.error().message.find("`y`: DoRA magnitudes"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("model.layers.0.self_attn.q_proj"), std::string::npos);

  adapter::Adapter wide = OneModuleAdapter(4, 8, 16, false);
  auto shapes = PlanCombine({{"x", &plain}, {"z", &wide}}, {});
  ASSERT_FALSE(shapes.ok());
  EXPECT_EQ(shapes.error().code, ErrorCode::ShapeMismatch);

  adapter::Adapter rank2 = OneModuleAdapter(2, 8, 8, false);
  CombineOptions ties;
  ties.method = CombineMethod::kTies;
  ties.density = 0.5;
  auto ranks = PlanCombine({{"x", &plain}, {"w", &rank2}}, ties);
  ASSERT_FALSE(ranks.ok());
  EXPECT_NE(ranks.error().message.find("same rank"), std::string::npos) << ranks.error().message;

  CombineOptions weights;
  weights.weights = {1, 2, 3};
  auto count = PlanCombine({{"x", &plain}, {"w", &rank2}}, weights);
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.error().message, "3 weight(s) for 2 adapter(s): give one weight per adapter");

  auto cat = PlanCombine({{"x", &plain}, {"w", &rank2}}, {});
  ASSERT_TRUE(cat.ok()) << cat.error().message;
  EXPECT_EQ(cat->rank, 6u);
  EXPECT_EQ(cat->output.weights.tensors[0].shape, (std::vector<uint64_t>{6, 8}));
}

TEST(CombinePlan, RefusesAnInputTensorItWouldDropUnlessAllowPartial) {
  adapter::Adapter plain = OneModuleAdapter(4, 8, 8, false), extra = OneModuleAdapter(4, 8, 8, false);
  extra.rejected.push_back(
      {"base_model.model.model.layers.0.self_attn.rotary_emb.inv_freq", "not a PEFT adapter tensor"});
  // Before: combine wrote the other tensors with exit 0 and no word of the dropped one.
  auto refused = PlanCombine({{"x", &plain}, {"y", &extra}}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::UnresolvedTensor);
  EXPECT_EQ(refused.error().message,
            "combine would drop 1 tensor(s); pass --allow-partial to write the rest anyway:\n"
            "  `y`: base_model.model.model.layers.0.self_attn.rotary_emb.inv_freq: not a PEFT adapter tensor");
  CombineOptions partial;
  partial.allow_partial = true;
  auto plan = PlanCombine({{"x", &plain}, {"y", &extra}}, partial);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->notes.front(), "dropped `y`: base_model.model.model.layers.0.self_attn.rotary_emb.inv_freq "
                                 "(--allow-partial): not a PEFT adapter tensor");
}

// Two adapters whose LoRA targets the embedding, each with the base embedding PEFT saves beside it
// (`…embed_tokens.base_layer.weight`), combined with weights (-1, 1).
struct EmbeddingPair {
  adapter::Adapter a = OneModuleAdapter(4, 8, 8, false), b = OneModuleAdapter(4, 8, 8, false);
  std::vector<float> embedding = {0.5f, -1.25f, 2.0f, 0.75f, -3.0f, 1.5f};
  EmbeddingPair() {
    for (adapter::Adapter* x : {&a, &b}) {
      adapter::Tensor t;
      t.dtype = Dtype::F32;
      t.shape = {3, 2};
      t.bytes.resize(24);
      std::memcpy(t.bytes.data(), embedding.data(), 24);
      x->extras.push_back({"model.embed_tokens.base_layer.weight", adapter::ExtraKind::kSavedEmbedding, t});
    }
  }
};

TEST(CombineWriter, TheBaseEmbeddingPeftSavesWithATargetedEmbeddingIsWrittenUnchanged) {
  EmbeddingPair pair;
  const std::vector<CombineInput> inputs = {{"x", &pair.a}, {"y", &pair.b}};
  CombineOptions o;
  o.weights = {-1, 1};
  auto plan = PlanCombine(inputs, o);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->extras.size(), 1u);
  EXPECT_TRUE(plan->extras[0].base_copy);
  testing::VectorSink sink;
  CombineWriter writer(plan.value(), inputs, sink);
  ASSERT_TRUE(writer.Begin().ok());
  ASSERT_TRUE(writer.Finish().ok());
  auto header = ParseWholeFile(sink.bytes);
  ASSERT_TRUE(header.ok()) << header.error().message;
  auto i = header->Find("base_model.model.model.embed_tokens.base_layer.weight");
  ASSERT_TRUE(i.has_value());
  const TensorInfo t = header->tensor(*i);
  std::vector<float> written(6);
  std::memcpy(written.data(), sink.bytes.data() + header->data_start() + t.begin, 24);
  // Before: Σ wᵢ·copyᵢ = -W + W = 0, which PEFT's loader writes over the model's embedding.
  EXPECT_EQ(written, pair.embedding);

  // Copies that differ cannot both be loaded over the model's embedding: refused, naming both inputs.
  float* other = reinterpret_cast<float*>(pair.b.extras[0].tensor.bytes.data());
  other[0] = 7.0f;
  auto plan2 = PlanCombine(inputs, o);
  ASSERT_TRUE(plan2.ok());
  testing::VectorSink sink2;
  CombineWriter differ(plan2.value(), inputs, sink2);
  Status s = differ.Begin();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::UnsupportedAdapter);
  EXPECT_NE(s.error().message.find("`x` and `y` hold different ones"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace pb::compose
