// `extract`'s core (src/compose/extract_*): planning from both models' headers, the push-based job, the factors
// (B·A equals the delta when its rank allows, the √S split), ranks by energy, what is saved or dropped, the
// reserved header, and the adapter PEFT's reader (ours) reads back with scaling 1 everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "adapter/adapter_io.h"
#include "compose/extract_job.h"
#include "compose/extract_plan.h"
#include "linalg/seeded_random.h"
#include "core/json.h"
#include "core/writer.h"

namespace pb::compose {
namespace {

class VectorSink : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> bytes) override {
    data.insert(data.end(), bytes.begin(), bytes.end());
    return Status::Ok();
  }
  std::vector<uint8_t> data;
};

using Values = std::function<float(const std::string& name, uint64_t index)>;

// A checkpoint built in memory: every tensor F32 (or BF16), its values from `values`.
struct Model {
  std::vector<uint8_t> file;
  Header header;
};

Model MakeModel(const std::vector<TensorSpec>& specs, const Values& values) {
  auto plan = PlanWrite(specs, std::nullopt, TensorOrder::kInput);
  EXPECT_TRUE(plan.ok());
  VectorSink sink;
  StreamingWriter writer(plan.value(), sink);
  EXPECT_TRUE(writer.Begin().ok());
  for (const auto& planned : writer.plan().tensors) {
    const auto& spec = specs[planned.input_index];
    uint64_t n = 1;
    for (auto d : spec.shape) n *= d;
    std::vector<uint8_t> bytes;
    for (uint64_t i = 0; i < n; ++i) {
      float v = values(spec.name, i);
      uint32_t u;
      std::memcpy(&u, &v, 4);
      if (spec.dtype == Dtype::BF16) u >>= 16;
      for (uint32_t b = 0; b < DtypeBits(spec.dtype) / 8; ++b) bytes.push_back(uint8_t(u >> (8 * b)));
    }
    EXPECT_TRUE(writer.Write(bytes).ok());
  }
  EXPECT_TRUE(writer.Finish().ok());
  auto header = ParseWholeFile(sink.data);
  EXPECT_TRUE(header.ok()) << header.error().message;
  return {sink.data, std::move(header.value())};
}

const std::string kLlamaConfig = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})";

std::vector<TensorSpec> LlamaSpecs(bool q_bias = false) {
  std::vector<TensorSpec> specs = {{"model.embed_tokens.weight", Dtype::F32, {16, 8}},
                                   {"lm_head.weight", Dtype::F32, {16, 8}},
                                   {"model.norm.weight", Dtype::F32, {8}}};
  for (int l = 0; l < 2; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "self_attn.q_proj.weight", Dtype::F32, {8, 8}});
    if (q_bias) specs.push_back({p + "self_attn.q_proj.bias", Dtype::F32, {8}});
    specs.push_back({p + "self_attn.k_proj.weight", Dtype::F32, {4, 8}});
    specs.push_back({p + "mlp.up_proj.weight", Dtype::F32, {12, 8}});
    specs.push_back({p + "mlp.down_proj.weight", Dtype::F32, {8, 12}});
    specs.push_back({p + "input_layernorm.weight", Dtype::F32, {8}});
  }
  return specs;
}

float BaseValue(const std::string& name, uint64_t i) {
  linalg::SeededRandom r(7, {std::hash<std::string>{}(name), i});
  return float(r.Uniform() - 0.5);
}

struct Run {
  ExtractPlan plan;
  std::vector<uint8_t> file;  // header + data
  ExtractOutcome outcome;
};

// Plans and runs an extraction, pushing each asked range in chunks of `chunk` bytes (0: whole).
Result<Run> Extract(const Model& base, const Model& tuned, ExtractArguments args, size_t chunk = 0,
                    uint64_t chunk_seed = 0) {
  auto options = ParseExtractArguments(args);
  if (!options.ok()) return options.error();
  auto plan = PlanExtract({{"model.safetensors", &base.header}}, {{"model.safetensors", &tuned.header}}, kLlamaConfig,
                          kLlamaConfig, options.value());
  if (!plan.ok()) return plan.error();
  Run run{std::move(plan.value()), {}, {}};
  VectorSink sink;
  ExtractJob job(run.plan, sink);
  linalg::SeededRandom sizes(chunk_seed, {1});
  while (auto read = job.NextRead()) {
    const auto& file = read->tuned ? tuned.file : base.file;
    uint64_t at = read->begin;
    while (at < read->end) {
      uint64_t n = chunk == 0 ? read->end - at : std::min<uint64_t>(read->end - at, 1 + sizes.Next() % chunk);
      PB_RETURN_IF_ERROR(job.Push({file.data() + at, size_t(n)}));
      at += n;
    }
  }
  auto outcome = job.Finish();
  if (!outcome.ok()) return outcome.error();
  run.outcome = std::move(outcome.value());
  run.file.assign(run.outcome.header.begin(), run.outcome.header.end());
  run.file.insert(run.file.end(), sink.data.begin(), sink.data.end());
  return run;
}

// A tensor of the written adapter as doubles.
std::vector<double> TensorValues(const std::vector<uint8_t>& file, const std::string& name,
                                 std::vector<uint64_t>* shape = nullptr) {
  auto header = ParseWholeFile(file);
  EXPECT_TRUE(header.ok()) << header.error().message;
  auto index = header->Find(name);
  EXPECT_TRUE(index.has_value()) << name;
  if (!index) return {};
  const TensorInfo info = header->tensor(*index);
  const TensorInfo* t = &info;
  if (shape) shape->assign(t->shape.begin(), t->shape.end());
  std::vector<double> out;
  const uint8_t* p = file.data() + header->data_start() + t->begin;
  for (uint64_t i = 0; i < t->element_count(); ++i) {
    uint32_t u = 0;
    if (t->dtype == Dtype::F32) std::memcpy(&u, p + 4 * i, 4);
    else u = uint32_t(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    out.push_back(f);
  }
  return out;
}

// B·A of a module as a rows × cols row-major matrix ([out, in]).
std::vector<double> Product(const std::vector<uint8_t>& file, const std::string& module,
                            std::string a_name = "lora_A.weight", std::string b_name = "lora_B.weight") {
  std::vector<uint64_t> as, bs;
  auto a = TensorValues(file, "base_model.model." + module + "." + a_name, &as);
  auto b = TensorValues(file, "base_model.model." + module + "." + b_name, &bs);
  const uint64_t r = as[0], in = as[1], out = bs[0];
  EXPECT_EQ(bs[1], r);
  std::vector<double> p(out * in, 0);
  for (uint64_t i = 0; i < out; ++i)
    for (uint64_t k = 0; k < r; ++k)
      for (uint64_t j = 0; j < in; ++j) p[i * in + j] += b[i * r + k] * a[k * in + j];
  return p;
}

// tuned = base + a rank-3 change on q_proj (both layers) and down_proj of layer 1, a changed final norm.
float TunedValue(const std::string& name, uint64_t i) {
  float v = BaseValue(name, i);
  auto low_rank = [&](uint64_t rows, uint64_t cols, uint64_t rank) {
    (void)rows;
    const uint64_t r = i / cols, c = i % cols;
    double s = 0;
    for (uint64_t k = 0; k < rank; ++k) s += BaseValue(name + "B", r * rank + k) * BaseValue(name + "A", k * cols + c);
    return float(s);
  };
  if (name.find("q_proj.weight") != std::string::npos) v += low_rank(8, 8, 3);
  if (name == "model.layers.1.mlp.down_proj.weight") v += low_rank(8, 12, 3);
  if (name == "model.norm.weight") v += 0.5f;
  return v;
}

TEST(Extract, RecoversALowRankDeltaAndDropsWhatDidNotChange) {
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  Model tuned = MakeModel(LlamaSpecs(), TunedValue);
  ExtractArguments args;
  args.rank = "3";
  args.dtype = "f32";
  auto run = Extract(base, tuned, args);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->outcome.decomposed, 3u);
  EXPECT_EQ(run->outcome.saved, 1u);  // model.norm; the embeddings and the head did not change
  EXPECT_EQ(run->outcome.max_rank, 3u);
  for (std::string m :
       {"model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj", "model.layers.1.mlp.down_proj"}) {
    auto p = Product(run->file, m);
    const std::string w = m + ".weight";
    for (uint64_t i = 0; i < p.size(); ++i) {
      double delta = double(TunedValue(w, i)) - double(BaseValue(w, i));
      EXPECT_NEAR(p[i], delta, 2e-6) << m << " " << i;
    }
  }
  for (const auto& r : run->outcome.modules)
    if (r.changed && r.kind == ExtractKind::kLora) {
      EXPECT_EQ(r.rank, 3u);
      EXPECT_LT(r.relative_error, 1e-6) << r.path;
    }
  auto norm = TensorValues(run->file, "base_model.model.model.norm.weight");
  for (uint64_t i = 0; i < norm.size(); ++i) EXPECT_EQ(norm[i], double(TunedValue("model.norm.weight", i)));
  auto header = ParseWholeFile(run->file);
  ASSERT_TRUE(header.ok());
  EXPECT_FALSE(
      header->Find("base_model.model.model.layers.0.mlp.down_proj.lora_A.weight").has_value());  // unchanged: dropped

  auto config = ParseJson(run->outcome.config_text, "adapter_config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config.value()["r"], 3);
  EXPECT_EQ(config.value()["lora_alpha"], 3);
  EXPECT_EQ(config.value()["modules_to_save"], Json::array({"model.norm"}));
  EXPECT_EQ(config.value()["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config.value()["target_modules"],
            Json::array({"model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj",
                         "model.layers.1.self_attn.q_proj"}));

  // Our PEFT reader takes it back: every module at scaling 1, the norm as a module to save.
  adapter::AdapterSource source;
  source.weights_name = "adapter_model.safetensors";
  source.weights = run->file;
  source.config = run->outcome.config_text;
  auto read = adapter::ReadAdapter(source, {});
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->adapter.modules.size(), 3u);
  for (const auto& m : read->adapter.modules) EXPECT_EQ(m.settings.scaling, 1.0) << m.path;
}

TEST(Extract, TheHeaderIsPaddedToTheReservedRegion) {
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  Model tuned = MakeModel(LlamaSpecs(), TunedValue);
  ExtractArguments args;
  args.rank = "3";
  auto run = Extract(base, tuned, args);
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_EQ(run->outcome.header.size(), run->plan.reserved_header);
  uint64_t n = 0;
  std::memcpy(&n, run->file.data(), 8);
  EXPECT_EQ(n + 8, run->plan.reserved_header);
  const std::string json(reinterpret_cast<const char*>(run->file.data()) + 8, n);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), ' ');
  EXPECT_EQ((8 + n) % 8, 0u);
  // The data follows the Rust serializer's layout for one dtype: tensors in name order.
  auto header = ParseWholeFile(run->file);
  ASSERT_TRUE(header.ok());
  std::vector<std::pair<uint64_t, std::string>> by_offset;
  for (size_t i = 0; i < header->tensor_count(); ++i)
    by_offset.push_back({header->tensor(i).begin, std::string(header->tensor(i).name)});
  std::sort(by_offset.begin(), by_offset.end());
  for (size_t i = 1; i < by_offset.size(); ++i) EXPECT_LT(by_offset[i - 1].second, by_offset[i].second);
}

TEST(Extract, AnyChunkingGivesTheSameBytes) {
  Model base = MakeModel(LlamaSpecs(true), BaseValue);
  Model tuned = MakeModel(LlamaSpecs(true), [](const std::string& name, uint64_t i) {
    return TunedValue(name, i) + (name == "model.layers.0.self_attn.q_proj.bias" ? 0.25f * float(i) : 0.f);
  });
  ExtractArguments args;
  args.energy = "0.9";
  auto whole = Extract(base, tuned, args);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  for (uint64_t seed : {1, 2, 3}) {
    auto chunked = Extract(base, tuned, args, 7, seed);
    ASSERT_TRUE(chunked.ok()) << chunked.error().message;
    EXPECT_EQ(chunked->file, whole->file);
    EXPECT_EQ(chunked->outcome.config_text, whole->outcome.config_text);
  }
}

TEST(Extract, ABiasThatChangedBecomesLoraBBias) {
  Model base = MakeModel(LlamaSpecs(true), BaseValue);
  Model tuned = MakeModel(LlamaSpecs(true), [](const std::string& name, uint64_t i) {
    return TunedValue(name, i) + (name == "model.layers.0.self_attn.q_proj.bias" ? 0.25f * float(i) : 0.f);
  });
  ExtractArguments args;
  args.rank = "3";
  args.dtype = "f32";
  auto run = Extract(base, tuned, args);
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto bias = TensorValues(run->file, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.bias");
  ASSERT_EQ(bias.size(), 8u);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_NEAR(bias[i], 0.25 * double(i), 1e-6);
  auto header = ParseWholeFile(run->file);
  EXPECT_FALSE(header->Find("base_model.model.model.layers.1.self_attn.q_proj.lora_B.bias").has_value());  // unchanged
  auto config = ParseJson(run->outcome.config_text, "adapter_config.json");
  EXPECT_EQ(config.value()["lora_bias"], true);
}

// A delta with known singular values: diag(s) in the first rows of an 8 × 8 q_proj.
TEST(Extract, EnergyPicksTheSmallestRankPerModuleAndPatternsRecordIt) {
  const std::vector<float> s0 = {4, 2, 1, 0.5f}, s1 = {4, 0.1f, 0.1f};
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  Model tuned = MakeModel(LlamaSpecs(), [&](const std::string& name, uint64_t i) {
    float v = BaseValue(name, i);
    const uint64_t r = i / 8, c = i % 8;
    if (r == c && name == "model.layers.0.self_attn.q_proj.weight" && r < s0.size()) v += s0[r];
    if (r == c && name == "model.layers.1.self_attn.q_proj.weight" && r < s1.size()) v += s1[r];
    return v;
  });
  ExtractArguments args;
  args.energy = "0.9";  // layer 0: 16 + 4 = 20 of 21.25 (rank 2); layer 1: 16 of 16.02 (rank 1)
  auto run = Extract(base, tuned, args);
  ASSERT_TRUE(run.ok()) << run.error().message;
  std::map<std::string, uint64_t> ranks;
  for (const auto& r : run->outcome.modules)
    if (r.changed && r.kind == ExtractKind::kLora) ranks[r.path] = r.rank;
  EXPECT_EQ(ranks["model.layers.0.self_attn.q_proj"], 2u);
  EXPECT_EQ(ranks["model.layers.1.self_attn.q_proj"], 1u);
  auto config = ParseJson(run->outcome.config_text, "adapter_config.json");
  EXPECT_EQ(config.value()["r"], 2);
  EXPECT_EQ(config.value()["rank_pattern"], Json({{"model.layers.1.self_attn.q_proj", 1}}));
  EXPECT_EQ(config.value()["alpha_pattern"], Json({{"model.layers.1.self_attn.q_proj", 1}}));
  for (const auto& r : run->outcome.modules)
    if (r.path == "model.layers.0.self_attn.q_proj") {
      EXPECT_NEAR(r.energy_kept, 20.0 / 21.25, 1e-6);
      EXPECT_NEAR(r.relative_error, std::sqrt(1.25 / 21.25), 1e-6);
    }
  adapter::AdapterSource source;
  source.weights_name = "adapter_model.safetensors";
  source.weights = run->file;
  source.config = run->outcome.config_text;
  auto read = adapter::ReadAdapter(source, {});
  ASSERT_TRUE(read.ok()) << read.error().message;
  for (const auto& m : read->adapter.modules) {
    EXPECT_EQ(m.settings.scaling, 1.0) << m.path;
    EXPECT_EQ(uint64_t(m.settings.r), m.rank()) << m.path;
  }
}

TEST(Extract, EmbeddingsAsLoraAreTransposedAsPeftsEmbeddingDelta) {
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  auto tuned_value = [](const std::string& name, uint64_t i) {
    float v = TunedValue(name, i);
    if (name == "model.embed_tokens.weight") v += float(i % 8 == 2) * float(i / 8) * 0.125f;  // rank 1: [16, 8]
    return v;
  };
  Model tuned = MakeModel(LlamaSpecs(), tuned_value);
  ExtractArguments args;
  args.rank = "2";
  args.embeddings = "lora";
  args.dtype = "f32";
  auto run = Extract(base, tuned, args);
  ASSERT_TRUE(run.ok()) << run.error().message;
  std::vector<uint64_t> as, bs;
  auto a = TensorValues(run->file, "base_model.model.model.embed_tokens.lora_embedding_A", &as);
  auto b = TensorValues(run->file, "base_model.model.model.embed_tokens.lora_embedding_B", &bs);
  EXPECT_EQ(as, (std::vector<uint64_t>{2, 16}));  // [r, vocab]
  EXPECT_EQ(bs, (std::vector<uint64_t>{8, 2}));   // [dim, r]
  for (uint64_t v = 0; v < 16; ++v)
    for (uint64_t d = 0; d < 8; ++d) {  // PEFT: ΔW = (B·A)ᵀ, [vocab, dim]
      double p = 0;
      for (uint64_t k = 0; k < 2; ++k) p += b[d * 2 + k] * a[k * 16 + v];
      const uint64_t i = v * 8 + d;
      EXPECT_NEAR(
          p, double(tuned_value("model.embed_tokens.weight", i)) - double(BaseValue("model.embed_tokens.weight", i)),
          2e-6);
    }
}

TEST(Extract, RefusesModelsThatDoNotMatch) {
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  auto specs = LlamaSpecs();
  specs[3].shape = {8, 9};  // layer 0's q_proj
  specs.pop_back();         // layer 1's input_layernorm
  Model tuned = MakeModel(specs, BaseValue);
  auto run = Extract(base, tuned, {});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().code, ErrorCode::ShapeMismatch);
  EXPECT_NE(run.error().message.find(
                "`model.layers.0.self_attn.q_proj.weight` is [8, 8] in the base, [8, 9] in the tuned model"),
            std::string::npos)
      << run.error().message;
  EXPECT_NE(run.error().message.find("`model.layers.1.input_layernorm.weight` is in the base only"), std::string::npos);
}

TEST(Extract, IdenticalModelsHaveNoLoraToWrite) {
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  auto run = Extract(base, base, {});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(run.error().message.find("no decomposed module differs"), std::string::npos) << run.error().message;
}

TEST(Extract, ANonFiniteDeltaIsRefusedNamingTheTensor) {
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  Model tuned = MakeModel(LlamaSpecs(), [](const std::string& name, uint64_t i) {
    return name == "model.layers.1.mlp.up_proj.weight" && i == 5 ? INFINITY : BaseValue(name, i);
  });
  auto run = Extract(base, tuned, {});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("`model.layers.1.mlp.up_proj.weight` differs by a value that is not finite"),
            std::string::npos)
      << run.error().message;
}

TEST(Extract, ArgumentsAreChecked) {
  auto bad = [](ExtractArguments a) {
    auto r = ParseExtractArguments(a);
    return r.ok() ? std::string() : r.error().message;
  };
  ExtractArguments a;
  a.rank = "0";
  EXPECT_NE(bad(a).find("--rank must be a positive integer"), std::string::npos);
  a = {};
  a.energy = "1.5";
  EXPECT_NE(bad(a).find("--energy must be a fraction in (0, 1]"), std::string::npos);
  a = {};
  a.rank = "4";
  a.energy = "0.5";
  EXPECT_NE(bad(a).find("not both"), std::string::npos);
  a = {};
  a.modules = "q_proj,,v_proj";
  EXPECT_NE(bad(a).find("empty module name"), std::string::npos);
  a = {};
  a.modules = "nope";
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  auto run = Extract(base, base, a);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("--modules: `nope` matches no module"), std::string::npos) << run.error().message;
}

TEST(Extract, ALayerListLeavesOtherChangedLayersOutAndSaysSo) {
  Model base = MakeModel(LlamaSpecs(), BaseValue);
  Model tuned = MakeModel(LlamaSpecs(), TunedValue);
  ExtractArguments args;
  args.modules = "q_proj";
  args.rank = "3";
  auto run = Extract(base, tuned, args);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->outcome.decomposed, 2u);
  EXPECT_NE(std::find(run->plan.left_out.begin(), run->plan.left_out.end(), "model.layers.1.mlp.down_proj"),
            run->plan.left_out.end());
}

}  // namespace
}  // namespace pb::compose
