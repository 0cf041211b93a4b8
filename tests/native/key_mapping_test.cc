// transformers' checkpoint key mapping (adapter/key_mapping.h): the shipped data parses and every pattern compiles;
// ViT's and Mixtral's checkpoint names map to the names transformers 5.24 loads them under (the expected names are
// what `ViTForImageClassification(...).named_modules()` and `MixtralForCausalLM(...).named_parameters()` list); and
// a merge finds a ViT adapter's modules in a checkpoint-named base, writes the checkpoint's names, and refuses a
// module transformers builds by a conversion, naming it.
#include "adapter/key_mapping.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "adapter/adapter.h"
#include "adapter/adapter_io.h"
#include "adapter/naming_tables.h"
#include "adapter_fixtures.h"
#include "core/header.h"
#include "core/writer.h"
#include "merge/merge_plan.h"
#include "test_util.h"

namespace pb::adapter {
namespace {

const KeyMapping& M() { return KeyMapping::Builtin(); }

std::string Loaded(const KeyRules& rules, std::string_view key) { return MapCheckpointKey(rules, key).name; }

TEST(KeyMapping, ShippedMappingParsesWithEveryPatternCompiled) {
  const EmbeddedFile* file = nullptr;
  for (const auto& f : EmbeddedNamingFiles())
    if (f.path == "transformers/key-mapping.json") file = &f;
  ASSERT_NE(file, nullptr);
  auto parsed = KeyMapping::Parse(file->text, file->path);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->transformers_version(), "5.24.0");  // requirements-golden.txt's pin
  EXPECT_EQ(parsed->model_types(), M().model_types());
  EXPECT_GT(M().model_types().size(), 100u);
}

TEST(KeyMapping, VitCheckpointNamesMapToTheLoadedModuleNames) {
  auto rules = M().ForConfig(R"({"architectures": ["ViTForImageClassification"], "model_type": "vit"})");
  ASSERT_TRUE(rules.has_value());
  EXPECT_EQ(Loaded(*rules, "vit.encoder.layer.11.attention.attention.query.weight"),
            "vit.layers.11.attention.q_proj.weight");
  EXPECT_EQ(Loaded(*rules, "vit.encoder.layer.0.attention.attention.value.bias"), "vit.layers.0.attention.v_proj.bias");
  EXPECT_EQ(Loaded(*rules, "vit.encoder.layer.0.attention.output.dense.weight"),
            "vit.layers.0.attention.o_proj.weight");
  EXPECT_EQ(Loaded(*rules, "vit.encoder.layer.1.intermediate.dense.weight"), "vit.layers.1.mlp.fc1.weight");
  EXPECT_EQ(Loaded(*rules, "vit.encoder.layer.1.output.dense.weight"), "vit.layers.1.mlp.fc2.weight");
  // Untouched: names the rules do not match, and the bare ViTModel's checkpoint (no `vit.` prefix) too.
  EXPECT_EQ(Loaded(*rules, "classifier.weight"), "classifier.weight");
  EXPECT_EQ(Loaded(*rules, "vit.embeddings.patch_embeddings.projection.weight"),
            "vit.embeddings.patch_embeddings.projection.weight");
  auto bare = M().ForConfig(R"({"architectures": ["ViTModel"], "model_type": "vit"})");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(Loaded(*bare, "encoder.layer.2.attention.attention.key.weight"), "layers.2.attention.k_proj.weight");
  // The rules are the model_type's: the data lists "vit" (ViTModel's, resolved as transformers does).
  EXPECT_EQ(M().ForModelType("vit")->rules.size(), rules->rules.size());
}

TEST(KeyMapping, MixtralRenamesItsMoeBlockAndSaysWhichTensorsItsConvertersBuild) {
  auto rules = M().ForConfig(R"({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral"})");
  ASSERT_TRUE(rules.has_value());
  EXPECT_EQ(rules->selected_by, "model_type mixtral");
  EXPECT_EQ(Loaded(*rules, "model.layers.3.block_sparse_moe.gate.weight"), "model.layers.3.mlp.gate.weight");
  EXPECT_EQ(Loaded(*rules, "model.layers.3.self_attn.q_proj.weight"), "model.layers.3.self_attn.q_proj.weight");
  LoadedKey w1 = MapCheckpointKey(*rules, "model.layers.3.block_sparse_moe.experts.7.w1.weight");
  ASSERT_NE(w1.not_renamed, nullptr);
  EXPECT_EQ(w1.not_renamed->kind, KeyRule::Kind::kConvert);
  EXPECT_EQ(w1.built, std::vector<std::string>{"model.layers.3.mlp.experts.gate_up_proj"});
  EXPECT_NE(w1.not_renamed->what.find("MergeModulelist"), std::string::npos) << w1.not_renamed->what;
  LoadedKey w2 = MapCheckpointKey(*rules, "model.layers.3.block_sparse_moe.experts.7.w2.weight");
  EXPECT_EQ(w2.built, std::vector<std::string>{"model.layers.3.mlp.experts.down_proj"});
  // A name boundary ends every pattern, as transformers' `(?!\w)`: `w1.weight_scale` is not `w1.weight`.
  EXPECT_EQ(MapCheckpointKey(*rules, "model.layers.3.block_sparse_moe.experts.7.w1.weight_scale").built.size(), 0u);
}

TEST(KeyMapping, LegacyRenamesApplyToEveryModelAndAConfigWithoutOneSelectsNothing) {
  auto rules = M().ForConfig(R"({"model_type": "no_such_model"})");
  ASSERT_TRUE(rules.has_value());
  EXPECT_EQ(Loaded(*rules, "bert.encoder.layer.0.attention.output.LayerNorm.gamma"),
            "bert.encoder.layer.0.attention.output.LayerNorm.weight");
  EXPECT_FALSE(M().ForConfig("not json").has_value());
}

TEST(KeyMapping, MalformedDataIsAPreciseError) {
  auto no_version = KeyMapping::Parse(R"({"model_types": {}})", "k.json");
  ASSERT_FALSE(no_version.ok());
  EXPECT_EQ(no_version.error().message, "k.json: transformers_version: must be a string");
  auto bad_pattern = KeyMapping::Parse(
      R"({"transformers_version": "x", "model_types": {"m": [{"kind": "rename", "targets": ["a"],
          "branches": [{"pattern": "(?<=x)a"}]}]}})",
      "k.json");
  ASSERT_FALSE(bad_pattern.ok());
  EXPECT_NE(bad_pattern.error().message.find("k.json: model_types.m[0].branches[0].pattern: "), std::string::npos)
      << bad_pattern.error().message;
  auto bad_kind = KeyMapping::Parse(
      R"({"transformers_version": "x", "model_types": {"m": [{"kind": "move", "targets": ["a"],
          "branches": [{"pattern": "a"}]}]}})",
      "k.json");
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_EQ(bad_kind.error().message,
            "k.json: model_types.m[0].kind: must be \"rename\", \"convert\" or \"unsupported\"");
}

// --- A merge into checkpoint-named bases ------------------------------------------------------------------------

struct Tensor {
  std::string name;
  std::vector<uint64_t> shape;
};

testing::Bytes File(const std::vector<Tensor>& ts) {
  std::vector<TensorSpec> specs;
  for (const auto& t : ts) specs.push_back({t.name, Dtype::F32, t.shape});
  auto plan = PlanWrite(specs, Metadata{{"format", "pt"}}, TensorOrder::kReference);
  EXPECT_TRUE(plan.ok());
  testing::VectorSink sink;
  StreamingWriter writer(plan.value(), sink);
  EXPECT_TRUE(writer.Begin().ok());
  for (const auto& p : writer.plan().tensors) {
    uint64_t n = 1;
    for (uint64_t d : ts[p.input_index].shape) n *= d;
    EXPECT_TRUE(writer.Write(testing::Bytes(n * 4, 0)).ok());
  }
  EXPECT_TRUE(writer.Finish().ok());
  return std::move(sink.bytes);
}

Adapter ReadPeft(const std::vector<Tensor>& ts, const std::string& fields) {
  static std::vector<testing::Bytes> keep;  // the adapter refers to its bytes
  keep.push_back(File(ts));
  static std::vector<std::string> configs;
  configs.push_back(testing::PeftConfig(fields));
  AdapterSource source{"adapter_model.safetensors", keep.back(), configs.back(), std::nullopt};
  auto r = ReadAdapter(source, ReadOptions{});
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(r->adapter);
}

Result<merge::MergePlan> Plan(const testing::Bytes& base, const Adapter& a, const std::string& config) {
  auto header = ParseWholeFile(base);
  EXPECT_TRUE(header.ok());
  static std::vector<Header> keep;
  keep.push_back(std::move(header.value()));
  return merge::PlanMerge({{"model.safetensors", &keep.back()}}, a, config, merge::MergeOptions{});
}

constexpr const char* kVitConfig = R"({"architectures": ["ViTForImageClassification"], "model_type": "vit"})";

TEST(KeyMappingMerge, VitAdapterMergesIntoTheCheckpointNamesAndKeepsThem) {
  const auto base = File({{"vit.encoder.layer.0.attention.attention.query.weight", {8, 8}},
                          {"vit.encoder.layer.0.attention.attention.value.weight", {8, 8}},
                          {"vit.encoder.layer.0.intermediate.dense.weight", {16, 8}},
                          {"vit.encoder.layer.0.output.dense.weight", {8, 16}},
                          {"classifier.weight", {3, 8}}});
  const std::string p = "base_model.model.vit.layers.0.";
  const Adapter a = ReadPeft({{p + "attention.q_proj.lora_A.weight", {2, 8}},
                              {p + "attention.q_proj.lora_B.weight", {8, 2}},
                              {p + "attention.v_proj.lora_A.weight", {2, 8}},
                              {p + "attention.v_proj.lora_B.weight", {8, 2}},
                              {p + "mlp.fc2.lora_A.weight", {2, 16}},
                              {p + "mlp.fc2.lora_B.weight", {8, 2}}},
                             R"("r": 2, "lora_alpha": 2, "target_modules": ["q_proj", "v_proj", "fc2"])");
  auto plan = Plan(base, a, kVitConfig);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->modules_matched, 3u);
  std::vector<std::string> merged;
  for (const auto& t : plan->shards.at(0).tensors)
    if (t.op == merge::TensorOp::kLowRank) merged.push_back(t.name);
  std::sort(merged.begin(), merged.end());
  EXPECT_EQ(merged, (std::vector<std::string>{"vit.encoder.layer.0.attention.attention.query.weight",
                                              "vit.encoder.layer.0.attention.attention.value.weight",
                                              "vit.encoder.layer.0.output.dense.weight"}));
  // Without the config (no model_type, so no mapping) the modules are not found, as before.
  auto header = ParseWholeFile(base);
  auto none = merge::PlanMerge({{"model.safetensors", &header.value()}}, a, std::nullopt, merge::MergeOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::ModulesNotFound);
}

TEST(KeyMappingMerge, AModuleBuiltByAConverterIsRefusedNamingTheConversion) {
  // Mixtral's experts as the checkpoint stores them; an adapter (written by hand: PEFT targets these parameters
  // with target_parameters) naming the fused projection as a module is refused with the converter named, not
  // reported as missing.
  const auto base = File({{"model.layers.0.block_sparse_moe.experts.0.w1.weight", {4, 8}},
                          {"model.layers.0.block_sparse_moe.experts.0.w3.weight", {4, 8}},
                          {"model.layers.0.block_sparse_moe.gate.weight", {2, 8}}});
  const std::string p = "base_model.model.model.layers.0.mlp.";
  const Adapter a = ReadPeft({{p + "experts.gate_up_proj.lora_A.weight", {2, 8}},
                              {p + "experts.gate_up_proj.lora_B.weight", {8, 2}},
                              {p + "gate.lora_A.weight", {2, 8}},
                              {p + "gate.lora_B.weight", {2, 2}}},
                             R"("r": 2, "lora_alpha": 2, "target_modules": ["gate_up_proj", "gate"])");
  auto plan = Plan(base, a, R"({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral"})");
  ASSERT_FALSE(plan.ok());
  ASSERT_EQ(plan.error().problems.size(), 1u) << plan.error().message;  // the router gate, renamed, is found
  const Problem& problem = plan.error().problems[0];
  EXPECT_EQ(problem.code, ErrorCode::UnsupportedBase);
  EXPECT_EQ(problem.module, "model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_NE(problem.message.find("transformers (model_type mixtral) builds it from the checkpoint's "
                                 "`model.layers.0.block_sparse_moe.experts.0.w1.weight` by a conversion "
                                 "(MergeModulelist"),
            std::string::npos)
      << problem.message;
}

}  // namespace
}  // namespace pb::adapter

namespace pb::adapter {
namespace {

TEST(KeyMappingMerge, RulesWrittenForTheHeadClassServeTheBaseModelByItsBaseModelPrefix) {
  // Step3p7's rules move `vision_model.` under `model.` (its base_model_prefix), as for the head class; the bare
  // Step3p7Model loads them without it, as transformers' loader strips the prefix again.
  auto rules = M().ForConfig(R"({"architectures": ["Step3p7Model"], "model_type": "step3p7"})");
  ASSERT_TRUE(rules.has_value());
  EXPECT_EQ(rules->base_model_prefix, "model");
  EXPECT_EQ(Loaded(*rules, "vision_model.transformer.resblocks.0.mlp.c_fc.weight"),
            "model.vision_model.layers.0.mlp.fc1.weight");
  const auto base = File({{"vision_model.transformer.resblocks.0.mlp.c_fc.weight", {16, 8}}});
  const std::string p = "base_model.model.vision_model.layers.0.mlp.fc1.";
  const Adapter a = ReadPeft({{p + "lora_A.weight", {2, 8}}, {p + "lora_B.weight", {16, 2}}},
                             R"("r": 2, "lora_alpha": 2, "target_modules": ["fc1"])");
  auto plan = Plan(base, a, R"({"architectures": ["Step3p7Model"], "model_type": "step3p7"})");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->shards.at(0).tensors.size(), 1u);
  EXPECT_EQ(plan->shards.at(0).tensors[0].name, "vision_model.transformer.resblocks.0.mlp.c_fc.weight");
  EXPECT_EQ(plan->shards.at(0).tensors[0].op, merge::TensorOp::kLowRank);
}

}  // namespace
}  // namespace pb::adapter
