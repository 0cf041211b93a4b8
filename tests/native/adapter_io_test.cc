// Reading adapters in every convention, writing them back, and the exactness of round trips: on the real
// adapters in tests/fixtures and on generated ones covering every LoRA variant.
#include <gtest/gtest.h>

#include <map>

#include "adapter/delta_norm.h"
#include "adapter/tensor_ops.h"
#include "adapter/translate.h"
#include "adapter/safetensors_emitter.h"
#include "adapter_fixtures.h"
#include "lazy_adapter.h"

namespace pb::adapter {
namespace {

using testing::AddLinear;
using testing::Bytes;
using testing::GeneratedAdapter;
using testing::GenTensor;

std::string Text(const std::filesystem::path& p) {
  Bytes b = testing::ReadAll(p);
  return std::string(b.begin(), b.end());
}

Bytes Emit(const SafetensorsOutput& out) {
  testing::VectorSink sink;
  Status s = EmitSafetensors(out, sink);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return sink.bytes;
}

void CheckHeaderOnly(const AdapterSource& source, const ReadOptions& options, const ReadResult& whole);
Bytes EmitReferenced(const Adapter& adapter, AdapterFormat format, const WriteOptions& options);

// Every read here is also done from the header alone (tensors fetched by range afterwards) and must agree.
ReadResult MustRead(const AdapterSource& source, ReadOptions options = {}) {
  auto r = ReadAdapter(source, options);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : std::string(ErrorCodeName(r.error().code)) + ": " + r.error().message);
  if (!r.ok()) std::abort();
  if (!source.header) CheckHeaderOnly(source, options, r.value());
  return std::move(r.value());
}

// Writes `adapter` as `format` and reads the result back.
struct Written {
  AdapterOutput output;
  Bytes weights;
  std::optional<std::string> config;
};
Written MustWrite(const Adapter& adapter, AdapterFormat format, WriteOptions options = {}) {
  auto out = WriteAdapter(adapter, format, options);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  if (!out.ok()) std::abort();
  Written w{out.value(), Emit(out->weights), std::nullopt};
  if (out->config_name) w.config = out->config_text;
  EXPECT_TRUE(EmitReferenced(adapter, format, options) == w.weights)
      << FormatName(format) << ": writing from referenced tensors gives other bytes";
  return w;
}

void ExpectSameTensor(const Tensor& a, const Tensor& b, const std::string& what) {
  EXPECT_EQ(a.dtype, b.dtype) << what;
  EXPECT_EQ(a.shape, b.shape) << what;
  EXPECT_TRUE(a.bytes == b.bytes) << what << ": values differ";
}

// The adapters are the same: modules (factors bitwise), extras, and the config's values.
void ExpectSameAdapter(const Adapter& a, const Adapter& b, bool extras = true) {
  ASSERT_EQ(a.modules.size(), b.modules.size());
  for (const auto& m : a.modules) {
    const LoraModule* n = b.FindModule(m.path);
    ASSERT_NE(n, nullptr) << m.path;
    EXPECT_EQ(m.shape, n->shape) << m.path;
    ExpectSameTensor(m.a, n->a, m.path + " A");
    ExpectSameTensor(m.b, n->b, m.path + " B");
    ASSERT_EQ(m.magnitude.has_value(), n->magnitude.has_value()) << m.path;
    if (m.magnitude) ExpectSameTensor(*m.magnitude, *n->magnitude, m.path + " magnitude");
    ASSERT_EQ(m.b_bias.has_value(), n->b_bias.has_value()) << m.path;
    if (m.b_bias) ExpectSameTensor(*m.b_bias, *n->b_bias, m.path + " lora_B.bias");
    EXPECT_EQ(m.settings.r, n->settings.r) << m.path;
    EXPECT_EQ(m.settings.scaling, n->settings.scaling) << m.path;
  }
  if (extras) {
    ASSERT_EQ(a.extras.size(), b.extras.size());
    for (size_t i = 0; i < a.extras.size(); ++i) {
      EXPECT_EQ(a.extras[i].key, b.extras[i].key);
      ExpectSameTensor(a.extras[i].tensor, b.extras[i].tensor, a.extras[i].key);
    }
  }
  // Equivalent configs: the same fields and values (key order is the writer's: PEFT sorts keys).
  EXPECT_EQ(nlohmann::json::parse(a.config.document.dump()), nlohmann::json::parse(b.config.document.dump()));
}

// Reads `source` again from its header (and inline tensors) only, then fetches every tensor by range in 1-byte
// and random pieces: the same adapter, mappings, notes and ‖ΔW‖ as the whole-file read.
void CheckHeaderOnly(const AdapterSource& source, const ReadOptions& options, const ReadResult& whole) {
  auto header = ParseWholeFile(source.weights);
  ASSERT_TRUE(header.ok());
  Bytes inline_bytes;
  for (const ByteRange& r : InlineTensorRanges(header.value()))
    inline_bytes.insert(inline_bytes.end(), source.weights.begin() + r.begin, source.weights.begin() + r.end);
  AdapterSource lazy = source;
  lazy.weights = {};
  lazy.header = &header.value();
  lazy.inline_bytes = inline_bytes;
  auto r = ReadAdapter(lazy, options);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->mappings.size(), whole.mappings.size());
  for (size_t i = 0; i < whole.mappings.size(); ++i) {
    EXPECT_EQ(r->mappings[i].from, whole.mappings[i].from);
    EXPECT_EQ(r->mappings[i].to, whole.mappings[i].to);
    EXPECT_EQ(r->mappings[i].action, whole.mappings[i].action);
  }
  EXPECT_EQ(r->adapter.notes, whole.adapter.notes);
  EXPECT_EQ(r->adapter.rejected.size(), whole.adapter.rejected.size());
  EXPECT_EQ(r->adapter.parameter_count(), whole.adapter.parameter_count());
  Bytes file(source.weights.begin(), source.weights.end());
  for (uint64_t mode : {1, 9}) {
    auto made = testing::MaterializeAll(r->adapter, file, {mode});
    ASSERT_TRUE(made.ok()) << made.error().message;
    ExpectSameAdapter(whole.adapter, made.value());
  }
  DeltaNormPass norms(r->adapter);
  ASSERT_TRUE(testing::SupplyFrom(norms, file, 0, {3}).ok());
  ASSERT_TRUE(norms.done());
  for (size_t i = 0; i < whole.adapter.modules.size(); ++i)
    EXPECT_EQ(norms.norms()[i], DeltaFrobeniusNorm(whole.adapter.modules[i])) << whole.adapter.modules[i].path;
}

// `adapter` written as `format` from references (its tensors moved into a blob), each tensor fetched when
// written, in random pieces.
Bytes EmitReferenced(const Adapter& adapter, AdapterFormat format, const WriteOptions& options) {
  testing::ExternalAdapter external = testing::Externalized(adapter, 0);
  auto out = WriteAdapter(external.adapter, format, options);
  EXPECT_TRUE(out.ok());
  if (!out.ok()) return {};
  testing::VectorSink sink;
  SafetensorsEmitter emitter(out->weights, sink);
  Status s = emitter.Begin();
  if (s.ok()) s = testing::SupplyFrom(emitter, external.blob, 0, {7});
  if (s.ok()) s = emitter.Finish();
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  uint64_t largest = 0;
  for (const auto& m : adapter.modules) largest = std::max({largest, m.a.byte_length(), m.b.byte_length()});
  for (const auto& x : adapter.extras) largest = std::max(largest, x.tensor.byte_length());
  // One tensor at a time, plus its rearranged copy for a moment.
  EXPECT_LE(emitter.peak_adapter_bytes(), 2 * largest);
  return sink.bytes;
}

// PEFT -> format -> PEFT through the public read/write API; returns the adapter read back.
ReadResult RoundTrip(const Adapter& adapter, AdapterFormat format, WriteOptions options = {}) {
  Written w = MustWrite(adapter, format, options);
  AdapterSource back{w.output.weights_name, w.weights, w.config, options.base_config};
  return MustRead(back, {format, options.arch, false, nullptr});
}

std::optional<std::filesystem::path> Fixture(const std::string& dir) {
  auto root = testing::FixturesDir();
  if (!root) return std::nullopt;
  return *root / dir;
}

struct RealAdapter {
  std::string config;
  Bytes weights;
  AdapterSource source(const std::string& name) const { return {name, weights, config, std::nullopt}; }
};
RealAdapter LoadReal(const std::filesystem::path& dir, const std::string& weights,
                     const std::string& config = "adapter_config.json") {
  return {Text(dir / config), testing::ReadAll(dir / weights)};
}

TEST(AdapterRead, RealPeftAdaptersAccountForEveryTensorAndReExportByteForByte) {
  struct Case {
    const char* dir;
    size_t modules, extras;
    double scaling;
  };
  for (const Case& c :
       {Case{"peft-gpt2-seqcls-cattn-cproj", 36, 1, 4.0}, Case{"peft-roberta-seqcls-query-value", 24, 4, 2.0}}) {
    auto dir = Fixture(c.dir);
    if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
    RealAdapter real = LoadReal(*dir, "adapter_model.safetensors");
    ReadResult r = MustRead(real.source("adapter_model.safetensors"));
    EXPECT_EQ(r.adapter.source_format, "peft");
    EXPECT_EQ(r.adapter.modules.size(), c.modules) << c.dir;
    EXPECT_EQ(r.adapter.extras.size(), c.extras) << c.dir;
    EXPECT_TRUE(r.adapter.rejected.empty()) << c.dir;
    for (const auto& m : r.adapter.modules) EXPECT_EQ(m.settings.scaling, c.scaling) << m.path;
    // Every tensor of the file has a mapping, and none is rejected.
    auto header = ParseWholeFile(real.weights);
    ASSERT_TRUE(header.ok());
    EXPECT_EQ(r.mappings.size(), header->tensor_count());
    Written w = MustWrite(r.adapter, AdapterFormat::kPeft);
    EXPECT_TRUE(w.weights == real.weights) << c.dir << ": adapter_model.safetensors differs";
    EXPECT_EQ(*w.config, real.config) << c.dir;
  }
}

TEST(AdapterRead, Gpt2CAttnAndBothCProjAreSuffixMatchedWithTheirOwnShapes) {
  auto dir = Fixture("peft-gpt2-seqcls-cattn-cproj");
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  RealAdapter real = LoadReal(*dir, "adapter_model.safetensors");
  ReadResult r = MustRead(real.source("adapter_model.safetensors"));
  const LoraModule* attn = r.adapter.FindModule("transformer.h.0.attn.c_attn");
  const LoraModule* mlp = r.adapter.FindModule("transformer.h.0.mlp.c_proj");
  ASSERT_NE(attn, nullptr);
  ASSERT_NE(mlp, nullptr);
  EXPECT_EQ(attn->in_features(), 768u);
  EXPECT_EQ(attn->out_features(), 2304u);  // fused q, k, v
  EXPECT_EQ(mlp->in_features(), 3072u);
  EXPECT_EQ(r.adapter.extras[0].key, "score.weight");
  EXPECT_EQ(r.adapter.extras[0].kind, ExtraKind::kModulesToSave);
}

TEST(AdapterRead, RealMlxAdaptersReadWithTransposedFactorsAndScale) {
  for (const char* name : {"mlx-lm-qwen2.5-0.5b", "mlx-examples-pr685-minicpm"}) {
    auto dir = Fixture(name);
    if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
    RealAdapter real = LoadReal(*dir, "adapters.safetensors");
    ReadResult r = MustRead(real.source("adapters.safetensors"));
    EXPECT_EQ(r.adapter.source_format, "mlx") << name;
    EXPECT_EQ(r.adapter.modules.size(), 8u) << name;
    EXPECT_TRUE(r.adapter.rejected.empty()) << name;
    auto header = ParseWholeFile(real.weights);
    ASSERT_TRUE(header.ok());
    for (const auto& m : r.adapter.modules) {
      EXPECT_EQ(m.rank(), 8u);
      EXPECT_EQ(m.settings.scaling, 10.0) << "mlx scale is PEFT's scaling";
      EXPECT_EQ(m.settings.alpha, 80.0);
      // PEFT A is mlx lora_a transposed.
      auto raw = header->Find(m.path + ".lora_a");
      ASSERT_TRUE(raw.has_value());
      auto lora_a = TensorFromFile(header.value(), real.weights, *raw);
      auto back = Transpose2D(m.a);
      ASSERT_TRUE(back.ok());
      ExpectSameTensor(back.value(), lora_a, m.path);
    }
    EXPECT_FALSE(r.adapter.config.layers_to_transform.empty()) << "only the last blocks carry LoRA";
    // mlx -> PEFT -> mlx gives back the same tensors.
    Written peft = MustWrite(r.adapter, AdapterFormat::kPeft);
    // The derived config is what PEFT's save_pretrained writes, peft_version filled as PEFT fills it.
    EXPECT_NE(peft.config->find("\"peft_version\": \"" + std::string(adapter::kPeftSchemaVersion) + "\""),
              std::string::npos)
        << *peft.config;
    ReadResult again = MustRead({"adapter_model.safetensors", peft.weights, peft.config, std::nullopt});
    Written mlx = MustWrite(again.adapter, AdapterFormat::kMlx);
    auto out_header = ParseWholeFile(mlx.weights);
    ASSERT_TRUE(out_header.ok());
    ASSERT_EQ(out_header->tensor_count(), header->tensor_count());
    for (size_t i = 0; i < header->tensor_count(); ++i) {
      auto j = out_header->Find(header->tensor(i).name);
      ASSERT_TRUE(j.has_value()) << header->tensor(i).name;
      ExpectSameTensor(TensorFromFile(out_header.value(), mlx.weights, *j),
                       TensorFromFile(header.value(), real.weights, i), std::string(header->tensor(i).name));
    }
  }
}

TEST(AdapterRoundTrip, RealPeftAdaptersSurviveEveryFormat) {
  for (const char* name : {"peft-gpt2-seqcls-cattn-cproj", "peft-roberta-seqcls-query-value"}) {
    auto dir = Fixture(name);
    if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
    RealAdapter real = LoadReal(*dir, "adapter_model.safetensors");
    ReadResult r = MustRead(real.source("adapter_model.safetensors"));
    for (AdapterFormat f : {AdapterFormat::kMlx, AdapterFormat::kKohya, AdapterFormat::kGgufNames}) {
      SCOPED_TRACE(std::string(name) + " via " + std::string(FormatName(f)));
      Written w = MustWrite(r.adapter, f);
      // The LoRA factors are mapped; the modules_to_save heads have no place outside PEFT and are rejected
      // with a reason.
      size_t rejected = 0;
      for (const auto& m : w.output.mappings) {
        if (m.to.empty()) {
          ++rejected;
          EXPECT_FALSE(m.reason.empty());
        }
      }
      EXPECT_EQ(rejected, r.adapter.extras.size());
      ReadResult back =
          MustRead({w.output.weights_name, w.weights, w.config, std::nullopt}, {f, std::nullopt, false, nullptr});
      Adapter expected = r.adapter;
      expected.extras.clear();
      ExpectSameAdapter(expected, back.adapter);
      // And back to PEFT: the LoRA tensors are the original bytes.
      Written peft = MustWrite(back.adapter, AdapterFormat::kPeft);
      EXPECT_EQ(*peft.config, real.config);
    }
  }
}

// --- generated adapters -------------------------------------------------------------------------------

GeneratedAdapter LlamaAdapter(const std::string& config_fields, Dtype dtype = Dtype::F32, bool dora = false,
                              bool embedding = false, bool bias = false) {
  std::vector<GenTensor> t;
  for (int layer = 0; layer < 2; ++layer) {
    std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    AddLinear(t, p + "q_proj", 4, 32, 32, dtype);
    AddLinear(t, p + "k_proj", 4, 32, 16, dtype);
    AddLinear(t, p + "v_proj", 4, 32, 16, dtype);
    if (dora)
      for (auto [m, out] : {std::pair{"q_proj", 32}, {"k_proj", 16}, {"v_proj", 16}})
        t.push_back({"base_model.model." + p + m + ".lora_magnitude_vector", dtype, {static_cast<uint64_t>(out)}});
    if (bias) t.push_back({"base_model.model." + p + "q_proj.lora_B.bias", dtype, {32}});
  }
  if (embedding) {
    t.push_back({"base_model.model.model.embed_tokens.lora_embedding_A", dtype, {4, 64}});
    t.push_back({"base_model.model.model.embed_tokens.lora_embedding_B", dtype, {32, 4}});
  }
  GeneratedAdapter g;
  g.config = testing::PeftConfig(config_fields);
  g.weights = testing::BuildSafetensors(t, 7);
  g.base_config = testing::LlamaConfigJson();
  return g;
}

constexpr const char* kTargets = R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "k_proj", "v_proj"])";

TEST(AdapterGenerated, PeftOutputIsByteIdenticalToPeftOrderInput) {
  for (Dtype d : {Dtype::F32, Dtype::BF16, Dtype::F16}) {
    GeneratedAdapter g = LlamaAdapter(kTargets, d);
    ReadResult r = MustRead(g.source());
    Written w = MustWrite(r.adapter, AdapterFormat::kPeft);
    EXPECT_TRUE(w.weights == g.weights) << DtypeName(d);
  }
}

TEST(AdapterGenerated, VariantsReadWithPeftSemantics) {
  {  // rsLoRA: alpha / sqrt(r)
    GeneratedAdapter g = LlamaAdapter(std::string(kTargets) + R"(, "use_rslora": true)");
    for (const auto& m : MustRead(g.source()).adapter.modules) EXPECT_DOUBLE_EQ(m.settings.scaling, 8.0 / 2.0);
  }
  {  // rank and alpha patterns: per module, first match in file order
    std::vector<GenTensor> t;
    AddLinear(t, "model.layers.0.self_attn.q_proj", 8, 32, 32);
    AddLinear(t, "model.layers.1.self_attn.q_proj", 4, 32, 32);
    GeneratedAdapter g{testing::PeftConfig(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj"],
        "rank_pattern": {"layers.0.self_attn.q_proj": 8}, "alpha_pattern": {"q_proj": 2})"),
                       testing::BuildSafetensors(t, 3), std::nullopt};
    ReadResult r = MustRead(g.source());
    EXPECT_EQ(r.adapter.FindModule("model.layers.0.self_attn.q_proj")->settings.scaling, 2.0 / 8);
    EXPECT_EQ(r.adapter.FindModule("model.layers.1.self_attn.q_proj")->settings.scaling, 2.0 / 4);
  }
  {  // DoRA, lora_B.bias, embedding LoRA
    GeneratedAdapter g = LlamaAdapter(
        R"("r": 4, "lora_alpha": 8, "use_dora": true, "target_modules": ["q_proj", "k_proj", "v_proj", "embed_tokens"])",
        Dtype::F32, /*dora=*/true, /*embedding=*/true);
    ReadResult r = MustRead(g.source());
    EXPECT_TRUE(r.adapter.FindModule("model.layers.0.self_attn.k_proj")->magnitude.has_value());
    const LoraModule* emb = r.adapter.FindModule("model.embed_tokens");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->shape, LoraShape::kEmbedding);
    EXPECT_EQ(emb->in_features(), 64u);
    EXPECT_EQ(emb->out_features(), 32u);
    GeneratedAdapter b = LlamaAdapter(std::string(kTargets) + R"(, "lora_bias": true)", Dtype::F32, false, false, true);
    EXPECT_TRUE(MustRead(b.source()).adapter.FindModule("model.layers.1.self_attn.q_proj")->b_bias.has_value());
  }
}

TEST(AdapterGenerated, ShapeContradictionsAreErrorsNamingTheModule) {
  std::vector<GenTensor> t;
  AddLinear(t, "model.layers.0.self_attn.q_proj", 4, 32, 32);
  t[1].shape = {32, 3};  // B's rank disagrees with A's
  GeneratedAdapter g{testing::PeftConfig(kTargets), testing::BuildSafetensors(t, 1), std::nullopt};
  auto r = ReadAdapter(g.source(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::ShapeMismatch);
  EXPECT_NE(r.error().message.find("model.layers.0.self_attn.q_proj"), std::string::npos);
  // Rank in the file differs from the config's r.
  std::vector<GenTensor> u;
  AddLinear(u, "model.layers.0.self_attn.q_proj", 4, 32, 32);
  GeneratedAdapter h{testing::PeftConfig(R"("r": 16, "target_modules": ["q_proj"])"), testing::BuildSafetensors(u, 1),
                     std::nullopt};
  auto s = ReadAdapter(h.source(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::ShapeMismatch);
  EXPECT_NE(s.error().message.find("r = 16"), std::string::npos) << s.error().message;
}

TEST(AdapterGenerated, UnknownTensorsAreReportedAndStrictRefusesThemAll) {
  std::vector<GenTensor> t;
  AddLinear(t, "model.layers.0.self_attn.q_proj", 4, 32, 32);
  t.push_back({"base_model.model.model.layers.0.self_attn.q_proj.hada_w1_a", Dtype::F32, {4, 4}});
  t.push_back({"stray.weight", Dtype::F32, {2}});
  GeneratedAdapter g{testing::PeftConfig(kTargets), testing::BuildSafetensors(t, 1), std::nullopt};
  ReadResult r = MustRead(g.source());
  ASSERT_EQ(r.adapter.rejected.size(), 2u);
  EXPECT_NE(r.adapter.rejected[0].reason.find("LoHa"), std::string::npos) << r.adapter.rejected[0].reason;
  auto strict = ReadAdapter(g.source(), {std::nullopt, std::nullopt, true, nullptr});
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.error().code, ErrorCode::UnresolvedTensor);
  EXPECT_NE(strict.error().message.find("hada_w1_a"), std::string::npos);
  EXPECT_NE(strict.error().message.find("stray.weight"), std::string::npos);
}

TEST(AdapterGenerated, UnsupportedAdaptersAreRefusedWithTheReason) {
  std::vector<GenTensor> t;
  AddLinear(t, "model.layers.0.self_attn.q_proj", 4, 32, 32);
  Bytes w = testing::BuildSafetensors(t, 1);
  auto loha = ReadAdapter({"adapter_model.safetensors", w, R"({"peft_type": "LOHA", "r": 4})", std::nullopt}, {});
  ASSERT_FALSE(loha.ok());
  EXPECT_EQ(loha.error().code, ErrorCode::UnsupportedAdapter);
  EXPECT_NE(loha.error().message.find("LOHA"), std::string::npos);
  auto pissa =
      ReadAdapter({"adapter_model.safetensors", w,
                   testing::PeftConfig(std::string(kTargets) + R"(, "init_lora_weights": "pissa")"), std::nullopt},
                  {});
  ASSERT_FALSE(pissa.ok());
  EXPECT_EQ(pissa.error().code, ErrorCode::UnsupportedAdapter);
  Error pickle = PickleAdapterError("adapter_model.bin");
  EXPECT_EQ(pickle.code, ErrorCode::UnsupportedAdapter);
  EXPECT_NE(pickle.message.find("safetensors"), std::string::npos);
}

TEST(AdapterRoundTrip, GeneratedVariantsSurviveMlxKohyaAndGguf) {
  struct Case {
    std::string name;
    GeneratedAdapter adapter;
    std::vector<AdapterFormat> formats;
  };
  const std::vector<AdapterFormat> all = {AdapterFormat::kMlx, AdapterFormat::kKohya, AdapterFormat::kGgufNames};
  std::vector<Case> cases;
  cases.push_back({"f32", LlamaAdapter(kTargets), all});
  cases.push_back({"bf16", LlamaAdapter(kTargets, Dtype::BF16), all});
  cases.push_back({"f16", LlamaAdapter(kTargets, Dtype::F16), all});
  cases.push_back({"rslora",
                   LlamaAdapter(std::string(kTargets) + R"(, "use_rslora": true)"),
                   {AdapterFormat::kMlx, AdapterFormat::kKohya}});
  cases.push_back({"dora",
                   LlamaAdapter(std::string(kTargets) + R"(, "use_dora": true)", Dtype::F32, true),
                   {AdapterFormat::kMlx, AdapterFormat::kKohya}});
  for (const auto& c : cases) {
    ReadResult r = MustRead(c.adapter.source());
    for (AdapterFormat f : c.formats) {
      SCOPED_TRACE(c.name + " via " + std::string(FormatName(f)));
      WriteOptions options;
      options.base_config = c.adapter.base_config;
      ReadResult back = RoundTrip(r.adapter, f, options);
      ExpectSameAdapter(r.adapter, back.adapter);
    }
  }
}

// T5's relative_attention_bias is an nn.Embedding (PEFT: lora_embedding_A/B) that no name rule recognises: without
// a base config, mlx -> PEFT wrote it as lora_A/lora_B.weight, which PEFT ignores. The mlx config records it.
TEST(AdapterRoundTrip, AnEmbeddingLoraNoNameRuleKnowsSurvivesMlxWithoutABaseConfig) {
  std::vector<GenTensor> t;
  const std::string block = "encoder.block.0.layer.0.SelfAttention.";
  AddLinear(t, block + "q", 4, 16, 16);
  t.push_back({"base_model.model." + block + "relative_attention_bias.lora_embedding_A", Dtype::F32, {4, 32}});
  t.push_back({"base_model.model." + block + "relative_attention_bias.lora_embedding_B", Dtype::F32, {2, 4}});
  const Bytes weights = testing::BuildSafetensors(t, 11);
  AdapterSource source{
      "adapter_model.safetensors", weights,
      testing::PeftConfig(R"("r": 4, "lora_alpha": 8, "target_modules": ["q", "relative_attention_bias"])"),
      std::nullopt};
  ReadResult r = MustRead(source);
  ASSERT_EQ(r.adapter.FindModule(block + "relative_attention_bias")->shape, LoraShape::kEmbedding);
  Written mlx = MustWrite(r.adapter, AdapterFormat::kMlx);
  ASSERT_TRUE(mlx.config);
  EXPECT_NE(
      mlx.config->find("\"peft_bridge.embedding_modules\": [\n        \"" + block + "relative_attention_bias\"\n    ]"),
      std::string::npos)
      << *mlx.config;
  ReadResult back = RoundTrip(r.adapter, AdapterFormat::kMlx);
  ExpectSameAdapter(r.adapter, back.adapter);
  Written peft = MustWrite(back.adapter, AdapterFormat::kPeft);
  auto header = ParseWholeFile(peft.weights);
  ASSERT_TRUE(header.ok());
  EXPECT_TRUE(header->Find("base_model.model." + block + "relative_attention_bias.lora_embedding_A"));
  EXPECT_TRUE(header->Find("base_model.model." + block + "relative_attention_bias.lora_embedding_B"));
  EXPECT_FALSE(header->Find("base_model.model." + block + "relative_attention_bias.lora_A.weight"));
  // A record that is not a list of paths is refused, not ignored.
  std::string bad = *mlx.config;
  const size_t at = bad.find("\"peft_bridge.embedding_modules\": [");
  bad.replace(at, std::string("\"peft_bridge.embedding_modules\": [").size(),
              "\"peft_bridge.embedding_modules\": 7, \"x\": [");
  auto refused = ReadAdapter({mlx.output.weights_name, mlx.weights, bad, std::nullopt},
                             {AdapterFormat::kMlx, std::nullopt, false, nullptr});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "adapter_config.json: `peft_bridge.embedding_modules` must be a list of module paths");
}

TEST(AdapterGguf, QueryAndKeyRowsArePermutedLikeLlamaCppAndRestoredOnRead) {
  GeneratedAdapter g = LlamaAdapter(kTargets);
  ReadResult r = MustRead(g.source());
  WriteOptions options;
  options.base_config = g.base_config;
  Written w = MustWrite(r.adapter, AdapterFormat::kGgufNames, options);
  auto header = ParseWholeFile(w.weights);
  ASSERT_TRUE(header.ok());
  auto q = header->Find("blk.0.attn_q.weight.lora_b");
  auto v = header->Find("blk.0.attn_v.weight.lora_b");
  ASSERT_TRUE(q && v);
  const LoraModule* q_mod = r.adapter.FindModule("model.layers.0.self_attn.q_proj");
  const LoraModule* v_mod = r.adapter.FindModule("model.layers.0.self_attn.v_proj");
  // v is not permuted; q's rows follow llama.cpp's order (4 heads of 8 rows: halves interleaved).
  ExpectSameTensor(TensorFromFile(header.value(), w.weights, *v), v_mod->b, "v");
  auto order = GgufRowOrder({RowPermutationKind::kLlamaRope, HeadCountField::kAttentionHeads}, 32, 4, 2);
  ASSERT_TRUE(order.ok());
  auto permuted = PermuteRows(q_mod->b, order.value());
  ASSERT_TRUE(permuted.ok());
  ExpectSameTensor(TensorFromFile(header.value(), w.weights, *q), permuted.value(), "q");
  EXPECT_FALSE(permuted->bytes == q_mod->b.bytes);
  // Uniform alpha without rsLoRA: B is kept and the alpha is stated.
  bool alpha_found = false;
  for (const auto& [k, val] : header->metadata())
    if (k == "adapter.lora.alpha") alpha_found = val == "8.0";
  EXPECT_TRUE(alpha_found);
}

TEST(AdapterGguf, PerModuleAlphaIsFoldedIntoB) {
  GeneratedAdapter g = LlamaAdapter(std::string(kTargets) + R"(, "alpha_pattern": {"v_proj": 16})");
  ReadResult r = MustRead(g.source());
  WriteOptions options;
  options.base_config = g.base_config;
  Written w = MustWrite(r.adapter, AdapterFormat::kGgufNames, options);
  auto header = ParseWholeFile(w.weights);
  ASSERT_TRUE(header.ok());
  const LoraModule* v = r.adapter.FindModule("model.layers.1.self_attn.v_proj");
  auto scaled = ScaleTensor(v->b, v->settings.scaling);
  ASSERT_TRUE(scaled.ok());
  ExpectSameTensor(TensorFromFile(header.value(), w.weights, *header->Find("blk.1.attn_v.weight.lora_b")),
                   scaled.value(), "v");
  // Read back without the carried config: scale 1 and B = s * B, which is the same delta.
  AdapterSource back{"adapter_model.safetensors", w.weights, std::nullopt, g.base_config};
  ReadResult again = MustRead(back, {AdapterFormat::kGgufNames, std::nullopt, false, nullptr});
  EXPECT_EQ(again.adapter.FindModule("model.layers.1.self_attn.v_proj")->settings.scaling, 1.0);
}

TEST(AdapterCompat, OldPeftConfigDropsNewDefaultsAndRefusesNewMeaning) {
  GeneratedAdapter g = LlamaAdapter(std::string(kTargets) + R"(, "exclude_modules": null, "peft_version": "0.18.0")");
  ReadResult r = MustRead(g.source());
  WriteOptions compat;
  compat.compat_pre_014 = true;
  Written w = MustWrite(r.adapter, AdapterFormat::kPeft, compat);
  EXPECT_EQ(w.config->find("exclude_modules"), std::string::npos);
  EXPECT_EQ(w.config->find("peft_version"), std::string::npos);
  EXPECT_NE(w.config->find("\"target_modules\""), std::string::npos);
  GeneratedAdapter b = LlamaAdapter(std::string(kTargets) + R"(, "lora_bias": true)", Dtype::F32, false, false, true);
  auto refused = WriteAdapter(MustRead(b.source()).adapter, AdapterFormat::kPeft, compat);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::UnsupportedAdapter);
  EXPECT_NE(refused.error().message.find("lora_bias"), std::string::npos);
}

TEST(AdapterTranslate, PlanAccountsForEveryInputTensor) {
  GeneratedAdapter g = LlamaAdapter(kTargets);
  auto result = Translate(g.source(), AdapterFormat::kMlx, {}, {});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->plan.size(), 12u);
  for (const auto& m : result->plan) {
    EXPECT_FALSE(m.to.empty()) << m.from;
    EXPECT_EQ(m.action, "transpose") << m.from;
  }
}

}  // namespace
}  // namespace pb::adapter

namespace pb::adapter {
namespace {

TEST(AdapterDeltaNorm, EqualsTheNormOfTheExplicitDelta) {
  GeneratedAdapter g = LlamaAdapter(std::string(kTargets) + R"(, "alpha_pattern": {"v_proj": -6})");
  for (const auto& m : MustRead(g.source()).adapter.modules) {
    const size_t r = m.rank(), in = m.in_features(), out = m.out_features();
    std::vector<float> a(r * in), b(out * r);
    std::memcpy(a.data(), m.a.bytes.data(), a.size() * 4);
    std::memcpy(b.data(), m.b.bytes.data(), b.size() * 4);
    double sum = 0;
    for (size_t o = 0; o < out; ++o)
      for (size_t i = 0; i < in; ++i) {
        double d = 0;
        for (size_t k = 0; k < r; ++k) d += double(b[o * r + k]) * a[k * in + i];
        sum += d * d;
      }
    const double expected = std::fabs(m.settings.scaling) * std::sqrt(sum);
    EXPECT_NEAR(DeltaFrobeniusNorm(m), expected, 1e-12 * expected) << m.path;
  }
}

}  // namespace
}  // namespace pb::adapter

namespace pb::adapter {
namespace {

TEST(AdapterRead, DiffusersAttentionProcessorFilesAreReadWithTheirModulePaths) {
  auto dir = Fixture("diffusers-sd15-attnproc-lora");
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  Bytes w = testing::ReadAll(*dir / "pytorch_lora_weights.safetensors");
  ReadResult r = MustRead({"pytorch_lora_weights.safetensors", w, std::nullopt, std::nullopt});
  EXPECT_EQ(r.adapter.source_format, "diffusers-attnproc");
  EXPECT_EQ(r.adapter.modules.size(), 128u);  // 256 tensors, every one accounted for
  EXPECT_TRUE(r.adapter.rejected.empty());
  const LoraModule* out = r.adapter.FindModule("down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_out.0");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->settings.scaling, 1.0);
  // It can be written as PEFT and kohya (and read back to the same tensors), but not in its own format.
  for (AdapterFormat f : {AdapterFormat::kPeft, AdapterFormat::kKohya}) {
    ReadResult back = RoundTrip(r.adapter, f);
    ExpectSameAdapter(r.adapter, back.adapter);
  }
  EXPECT_FALSE(WriteAdapter(r.adapter, AdapterFormat::kDiffusersAttnProc, {}).ok());
}

}  // namespace
}  // namespace pb::adapter
