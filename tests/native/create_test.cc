// `create`'s core (src/compose/create_*): the portable random numbers, module selection with PEFT's rules, the
// config PEFT writes, the tensors (A's distribution, B zero, DoRA's row norms) and the streaming emitter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <map>

#include "adapter/lora_config.h"
#include "compose/create_plan.h"
#include "compose/create_random.h"
#include "compose/create_writer.h"
#include "core/json.h"
#include "core/writer.h"

namespace pb::compose {
namespace {

// The FNV-1a hashes of two created adapters (CreateWrite.PinnedBytes), from a native run.
constexpr uint64_t PINNED_KAIMING = 0xdd897d29940fb329ULL, PINNED_GAUSSIAN = 0xc8233647132f73cdULL;

class VectorSink : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> bytes) override {
    data.insert(data.end(), bytes.begin(), bytes.end());
    return Status::Ok();
  }
  std::vector<uint8_t> data;
};

// A base checkpoint's header (and its data, F32 values given per tensor, or a ramp) built in memory.
struct Base {
  std::vector<uint8_t> file;
  Header header;
};

Base MakeBase(const std::vector<TensorSpec>& specs, Dtype dtype = Dtype::F32) {
  std::vector<TensorSpec> typed = specs;
  for (auto& s : typed) s.dtype = dtype;
  auto plan = PlanWrite(typed, std::nullopt, TensorOrder::kInput);
  EXPECT_TRUE(plan.ok());
  VectorSink sink;
  StreamingWriter writer(plan.value(), sink);
  EXPECT_TRUE(writer.Begin().ok());
  for (const auto& planned : writer.plan().tensors) {
    const auto& spec = typed[planned.input_index];
    uint64_t n = 1;
    for (auto d : spec.shape) n *= d;
    std::vector<uint8_t> bytes;
    for (uint64_t i = 0; i < n; ++i) {
      float v = float(int(i % 7) - 3) * 0.25f + float(planned.input_index) * 0.125f;
      if (dtype == Dtype::F32) {
        uint8_t b[4];
        std::memcpy(b, &v, 4);
        bytes.insert(bytes.end(), b, b + 4);
      } else {  // BF16: the top half of the float (the values above are exact in bf16)
        uint32_t u;
        std::memcpy(&u, &v, 4);
        bytes.push_back(uint8_t(u >> 16));
        bytes.push_back(uint8_t(u >> 24));
      }
    }
    EXPECT_TRUE(writer.Write(bytes).ok());
  }
  EXPECT_TRUE(writer.Finish().ok());
  uint64_t n = 0;
  std::memcpy(&n, sink.data.data(), 8);
  auto header = ParseHeader(std::string(reinterpret_cast<const char*>(sink.data.data()) + 8, n), sink.data.size());
  EXPECT_TRUE(header.ok()) << header.error().message;
  return {sink.data, std::move(header.value())};
}

Base LlamaBase(Dtype dtype = Dtype::F32) {
  std::vector<TensorSpec> specs = {{"model.embed_tokens.weight", Dtype::F32, {16, 8}},
                                   {"lm_head.weight", Dtype::F32, {16, 8}},
                                   {"model.norm.weight", Dtype::F32, {8}}};
  for (int l = 0; l < 2; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "self_attn.q_proj.weight", Dtype::F32, {8, 8}});
    specs.push_back({p + "self_attn.k_proj.weight", Dtype::F32, {4, 8}});
    specs.push_back({p + "self_attn.v_proj.weight", Dtype::F32, {4, 8}});
    specs.push_back({p + "self_attn.o_proj.weight", Dtype::F32, {8, 8}});
    specs.push_back({p + "mlp.gate_proj.weight", Dtype::F32, {12, 8}});
    specs.push_back({p + "mlp.up_proj.weight", Dtype::F32, {12, 8}});
    specs.push_back({p + "mlp.down_proj.weight", Dtype::F32, {8, 12}});
    specs.push_back({p + "input_layernorm.weight", Dtype::F32, {8}});
  }
  return MakeBase(specs, dtype);
}

const char* kLlamaConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})";

Result<CreatePlan> Plan(const Base& base, CreateArguments args, std::optional<std::string> config = kLlamaConfig) {
  auto options = ParseCreateArguments(args);
  if (!options.ok()) return options.error();
  return PlanCreate({{"model.safetensors", &base.header}}, config, options.value());
}

CreateArguments Targets(std::string t) {
  CreateArguments a;
  a.target_modules = std::move(t);
  return a;
}

std::vector<float> Floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST(CreateRandom, PortableLogIsAccurate) {
  for (double x : {1e-300, 1e-10, 0.001, 0.25, 0.5, 0.7071, 0.99999, 1.0, 1.5, 2.0, 10.0, 12345.678, 1e300}) {
    EXPECT_NEAR(PortableLog(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x)))) << x;
  }
  EXPECT_EQ(PortableLog(1.0), 0.0);
}

TEST(CreateRandom, StreamsAreKeyedBySeedAndName) {
  InitStream a(0, "model.layers.0.q_proj"), b(0, "model.layers.0.q_proj"), c(1, "model.layers.0.q_proj"),
      d(0, "model.layers.0.v_proj");
  const uint64_t first = a.NextBits();
  EXPECT_EQ(first, b.NextBits());
  EXPECT_NE(first, c.NextBits());
  EXPECT_NE(first, d.NextBits());
  // Pinned (computed independently in Python from SplitMix64 and FNV-1a): the same bits on every platform and in
  // WASM (this suite also runs compiled to WASM); a change here changes every created adapter.
  EXPECT_EQ(first, 0xc6aa6850afa3723cULL);
  InitStream e(42, "x");
  double u = e.NextUniform();
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

TEST(CreateRandom, GaussianMoments) {
  InitStream s(3, "g");
  const int n = 200000;
  double sum = 0, sq = 0, fourth = 0;
  for (int i = 0; i < n; ++i) {
    double z = s.NextGaussian();
    sum += z;
    sq += z * z;
    fourth += z * z * z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 5 / std::sqrt(double(n)));
  EXPECT_NEAR(sq / n, 1.0, 5 * std::sqrt(2.0 / n));
  EXPECT_NEAR(fourth / n, 3.0, 0.1);
}

TEST(CreateRandom, KaimingBoundIsTorchs) {
  // torch: gain = sqrt(2 / (1 + 5.000000000000001)), std = gain / sqrt(fan), bound = sqrt(3) * std.
  EXPECT_NEAR(KaimingUniformBound(64), 0.125, 1e-15);
  EXPECT_NEAR(KaimingUniformBound(4096), 1.0 / 64, 1e-16);
}

TEST(CreateArgs, Checks) {
  auto error = [](CreateArguments a) {
    auto r = ParseCreateArguments(a);
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_EQ(error({}), "--target-modules (or --target-regex) is required");
  CreateArguments a = Targets("q_proj");
  a.r = "0";
  EXPECT_EQ(error(a), "--r must be a positive integer (got `0`)");
  a.r = "8x";
  EXPECT_EQ(error(a), "--r must be a positive integer (got `8x`)");
  a.r = "4";
  a.alpha = "nan";
  EXPECT_EQ(error(a), "--alpha must be a positive number (got `nan`)");
  a.alpha = "-1";
  EXPECT_EQ(error(a), "--alpha must be a positive number (got `-1`)");
  a.alpha = "16.5";
  EXPECT_EQ(error(a), "");
  EXPECT_FALSE(ParseCreateArguments(a)->alpha_is_int);
  a.alpha = "16";
  EXPECT_TRUE(ParseCreateArguments(a)->alpha_is_int);
  a.seed = "-3";
  EXPECT_EQ(error(a), "--seed must be an integer from 0 to 18446744073709551615 (got `-3`)");
  EXPECT_EQ(error(Targets("q_proj,,v_proj")), "--target-modules has an empty module name (`q_proj,,v_proj`)");
  EXPECT_EQ(error(Targets("all-linear,q_proj")), "--target-modules: all-linear cannot be combined with module names");
  CreateArguments both = Targets("q_proj");
  both.target_regex = ".*";
  EXPECT_EQ(error(both), "give --target-modules or --target-regex, not both");
  EXPECT_TRUE(RefuseConfigAsBase("model/config.json").has_value());
  EXPECT_FALSE(RefuseConfigAsBase("model/model.safetensors.index.json").has_value());
}

TEST(CreatePlan, ListTargetsAndConfig) {
  Base base = LlamaBase();
  CreateArguments a = Targets("q_proj,v_proj");
  a.r = "4";
  a.alpha = "16";
  auto plan = Plan(base, a);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->modules.size(), 4u);
  EXPECT_EQ(plan->modules[0].path, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(plan->modules[1].path, "model.layers.0.self_attn.v_proj");
  EXPECT_EQ(plan->modules[1].out_features, 4u);
  EXPECT_EQ(plan->modules[1].in_features, 8u);
  EXPECT_DOUBLE_EQ(plan->modules[0].scaling, 4.0);
  EXPECT_EQ(plan->arch, "llama");
  // The config PEFT writes: its defaults plus what these settings change, parsed back by our own reader.
  auto config = adapter::ParseLoraConfig(plan->config_text);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->r, 4);
  EXPECT_EQ(config->lora_alpha, 16);
  EXPECT_EQ(config->target_modules.names, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_TRUE(config->document["lora_alpha"].is_number_integer());
  EXPECT_EQ(config->document["auto_mapping"]["parent_library"], "transformers.models.llama.modeling_llama");
  EXPECT_EQ(config->document["init_lora_weights"], true);
  EXPECT_EQ(plan->specs.size(), 8u);
  EXPECT_EQ(plan->specs[0].name, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(plan->specs[0].shape, (std::vector<uint64_t>{4, 8}));
  EXPECT_EQ(plan->specs[1].shape, (std::vector<uint64_t>{8, 4}));
}

TEST(CreatePlan, AllLinearSkipsTheOutputHeadAndEmbeddings) {
  Base base = LlamaBase();
  auto plan = Plan(base, Targets("all-linear"));
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->modules.size(), 14u);
  for (const auto& m : plan->modules) {
    EXPECT_NE(m.path, "lm_head");
    EXPECT_NE(m.path, "model.embed_tokens");
  }
  auto config = adapter::ParseLoraConfig(plan->config_text);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->target_modules.names.size(), 14u);  // < 20: the full names, as PEFT saves them
  // No table: all-linear cannot tell a Linear from an embedding.
  CreateArguments unknown = Targets("all-linear");
  Base odd = MakeBase({{"blocks.0.thing.weight", Dtype::F32, {4, 4}}});
  auto refused = Plan(odd, unknown, std::nullopt);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("all-linear needs the base's layer types"), std::string::npos);
}

TEST(CreatePlan, MinimalTargetModulesForTwentyNamesOrMore) {
  std::vector<TensorSpec> specs;
  for (int l = 0; l < 12; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    specs.push_back({p + "q_proj.weight", Dtype::F32, {8, 8}});
    specs.push_back({p + "v_proj.weight", Dtype::F32, {8, 8}});
    specs.push_back({p + "k_proj.weight", Dtype::F32, {8, 8}});
  }
  Base base = MakeBase(specs);
  auto plan = Plan(base, Targets("all-linear"));
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->modules.size(), 36u);
  // PEFT's _find_minimal_target_modules: every linear is targeted, so the leaf names separate them.
  EXPECT_EQ(plan->target_modules, (std::vector<std::string>{"k_proj", "q_proj", "v_proj"}));
}

TEST(CreatePlan, Errors) {
  Base base = LlamaBase();
  auto message = [&](CreateArguments a) {
    auto r = Plan(base, a);
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(message(Targets("qproj")).find("--target-modules: `qproj` matches no module of the base"),
            std::string::npos);
  EXPECT_NE(message(Targets("embed_tokens")).find("model.embed_tokens: an embedding"), std::string::npos);
  EXPECT_NE(message(Targets("input_layernorm")).find("1-D (a norm?), not a Linear"), std::string::npos);
  EXPECT_NE(message(Targets("self_attn")).find("a container of other modules, not a layer"), std::string::npos);
  CreateArguments regex;
  regex.target_regex = R"(.*\.(q|k)_proj)";
  auto plan = Plan(base, regex);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->modules.size(), 4u);
  auto config = adapter::ParseLoraConfig(plan->config_text);
  EXPECT_EQ(config->document["target_modules"], R"(.*\.(q|k)_proj)");
  regex.target_regex = "q_proj";  // fullmatch: the whole name
  EXPECT_NE(message(regex).find("matches no module of the base"), std::string::npos);
  regex.target_regex = "(?<=x)q";
  EXPECT_FALSE(Plan(base, regex).ok());
}

TEST(CreatePlan, Conv1dOrientationAndFanInFanOut) {
  Base base = MakeBase({{"transformer.h.0.attn.c_attn.weight", Dtype::F32, {8, 24}},
                        {"transformer.h.0.mlp.c_fc.weight", Dtype::F32, {8, 32}},
                        {"transformer.wte.weight", Dtype::F32, {16, 8}}});
  auto plan = Plan(base, Targets("c_attn,c_fc"), R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->modules[0].kind, adapter::ModuleKind::kConv1D);
  EXPECT_EQ(plan->modules[0].in_features, 8u);
  EXPECT_EQ(plan->modules[0].out_features, 24u);
  auto config = adapter::ParseLoraConfig(plan->config_text);
  EXPECT_TRUE(config->fan_in_fan_out);
}

// Writes the whole adapter; returns its tensors by name (F32).
std::map<std::string, std::vector<float>> Emit(const CreatePlan& plan, const Base& base, size_t chunk = 5) {
  MagnitudePass pass(plan);
  for (const auto& r : pass.ranges())
    for (uint64_t pos = r.begin; pos < r.end; pos += chunk)
      EXPECT_TRUE(pass.Push({base.file.data() + pos, size_t(std::min<uint64_t>(chunk, r.end - pos))}).ok());
  EXPECT_TRUE(pass.done());
  VectorSink sink;
  AdapterEmitter emitter(plan, pass.TakeNorms(), sink);
  EXPECT_TRUE(emitter.Begin().ok());
  EXPECT_TRUE(emitter.Finish().ok());
  EXPECT_EQ(sink.data.size(), plan.write.total_size());
  uint64_t n = 0;
  std::memcpy(&n, sink.data.data(), 8);
  auto header = ParseHeader(std::string(reinterpret_cast<const char*>(sink.data.data()) + 8, n), sink.data.size());
  EXPECT_TRUE(header.ok());
  std::map<std::string, std::vector<float>> out;
  for (size_t i = 0; i < header->tensor_count(); ++i) {
    auto t = header->tensor(i);
    const uint8_t* p = sink.data.data() + header->data_start() + t.begin;
    out[std::string(t.name)] = Floats(std::vector<uint8_t>(p, p + t.byte_length()));
  }
  return out;
}

TEST(CreateWrite, KaimingAZeroBAndDeterministic) {
  Base base = LlamaBase();
  CreateArguments a = Targets("q_proj,down_proj");
  auto plan = Plan(base, a);
  ASSERT_TRUE(plan.ok());
  auto tensors = Emit(plan.value(), base);
  ASSERT_EQ(tensors.size(), 8u);
  for (const auto& [name, values] : tensors) {
    if (name.find("lora_B") != std::string::npos) {
      for (float v : values) EXPECT_EQ(v, 0.0f);
      continue;
    }
    const double bound = name.find("down_proj") != std::string::npos ? 1 / std::sqrt(12.0) : 1 / std::sqrt(8.0);
    for (float v : values) EXPECT_LE(std::fabs(v), bound * (1 + 1e-7)) << name;
  }
  EXPECT_EQ(tensors, Emit(plan.value(), base, 3));  // the same bytes whatever the chunking, every time
  a.seed = "1";
  auto other = Plan(base, a);
  EXPECT_NE(Emit(other.value(), base), tensors);
}

uint64_t Fnv(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ULL;
  return h;
}

TEST(CreateWrite, PinnedBytes) {
  // The whole adapter_model.safetensors for one setting of each init: the same bytes natively and in WASM.
  Base base = LlamaBase();
  for (const char* init : {"kaiming", "gaussian"}) {
    CreateArguments a = Targets("q_proj,down_proj");
    a.init = init;
    a.seed = "5";
    a.dora = true;
    auto plan = Plan(base, a);
    ASSERT_TRUE(plan.ok());
    MagnitudePass pass(plan.value());
    for (const auto& r : pass.ranges())
      ASSERT_TRUE(pass.Push({base.file.data() + r.begin, size_t(r.end - r.begin)}).ok());
    VectorSink sink;
    AdapterEmitter emitter(plan.value(), pass.TakeNorms(), sink);
    ASSERT_TRUE(emitter.Begin().ok());
    ASSERT_TRUE(emitter.Finish().ok());
    EXPECT_EQ(Fnv(sink.data), std::string(init) == "kaiming" ? PINNED_KAIMING : PINNED_GAUSSIAN) << init;
  }
}

TEST(CreateWrite, GaussianStdIsOneOverR) {
  std::vector<TensorSpec> specs = {{"model.layers.0.self_attn.q_proj.weight", Dtype::F32, {64, 512}}};
  Base base = MakeBase(specs);
  CreateArguments a = Targets("q_proj");
  a.init = "gaussian";
  a.r = "16";
  auto plan = Plan(base, a);
  ASSERT_TRUE(plan.ok());
  auto tensors = Emit(plan.value(), base, 4096);
  const auto& values = tensors.at("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  double sum = 0, sq = 0;
  for (float v : values) {
    sum += v * 16.0;
    sq += double(v) * v * 256.0;
  }
  const double n = double(values.size());
  EXPECT_NEAR(sum / n, 0.0, 5 / std::sqrt(n));
  EXPECT_NEAR(sq / n, 1.0, 5 * std::sqrt(2 / n));
  EXPECT_EQ(adapter::ParseLoraConfig(plan->config_text)->init_lora_weights, "gaussian");
}

TEST(CreateWrite, DoraMagnitudesAreRowNorms) {
  for (Dtype dtype : {Dtype::F32, Dtype::BF16}) {
    Base base = MakeBase({{"transformer.h.0.attn.c_attn.weight", Dtype::F32, {8, 24}},
                          {"model.layers.0.self_attn.q_proj.weight", Dtype::F32, {6, 10}}},
                         dtype);
    CreateArguments a = Targets("c_attn,q_proj");
    a.dora = true;
    // The gpt2 table for c_attn's Conv1D kind; q_proj is then a Linear of no table (a note says so).
    a.target_modules = "c_attn,q_proj";
    auto options = ParseCreateArguments(a);
    options->arch = "gpt2";
    auto plan = PlanCreate({{"model.safetensors", &base.header}}, std::nullopt, options.value());
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    auto tensors = Emit(plan.value(), base, 7);
    auto value = [&](size_t tensor, uint64_t i) {  // the base's element i of tensor `tensor`, as MakeBase made it
      return double(float(int(i % 7) - 3) * 0.25f + float(tensor) * 0.125f);
    };
    // Conv1D [in=8, out=24]: the norm of column j.
    const auto& m1 = tensors.at("base_model.model.transformer.h.0.attn.c_attn.lora_magnitude_vector");
    ASSERT_EQ(m1.size(), 24u);
    for (uint64_t j = 0; j < 24; ++j) {
      double s = 0;
      for (uint64_t i = 0; i < 8; ++i) s += value(0, i * 24 + j) * value(0, i * 24 + j);
      EXPECT_NEAR(m1[j], std::sqrt(s), dtype == Dtype::BF16 ? std::sqrt(s) / 128 : 1e-6) << j;
    }
    const auto& m2 = tensors.at("base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector");
    ASSERT_EQ(m2.size(), 6u);
    for (uint64_t r = 0; r < 6; ++r) {
      double s = 0;
      for (uint64_t i = 0; i < 10; ++i) s += value(1, r * 10 + i) * value(1, r * 10 + i);
      EXPECT_NEAR(m2[r], std::sqrt(s), dtype == Dtype::BF16 ? std::sqrt(s) / 128 : 1e-6) << r;
    }
  }
}

}  // namespace
}  // namespace pb::compose
