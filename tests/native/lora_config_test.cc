// adapter_config.json read with PEFT's meaning: real files, every PEFT era, and every refusal.
#include <gtest/gtest.h>

#include <algorithm>

#include "adapter/lora_config.h"
#include "text/python_json.h"
#include "test_util.h"

namespace pb::testing {
namespace {

using adapter::LoraConfig;
using adapter::ModuleSelector;
using adapter::ParseLoraConfig;

std::optional<std::string> FixtureConfig(const std::string& dir) {
  auto root = FixturesDir();
  if (!root) return std::nullopt;
  Bytes b = ReadAll(*root / dir / "adapter_config.json");
  return std::string(b.begin(), b.end());
}

LoraConfig MustParse(const std::string& json) {
  auto c = ParseLoraConfig(json);
  EXPECT_TRUE(c.ok()) << json << "\n" << c.error().message;
  return c.ok() ? c.value() : LoraConfig{};
}

std::vector<std::string> Names(std::initializer_list<const char*> names) { return {names.begin(), names.end()}; }

TEST(LoraConfig, Gpt2FixtureParsesWithPeftValues) {
  auto text = FixtureConfig("peft-gpt2-seqcls-cattn-cproj");
  if (!text) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  LoraConfig c = MustParse(*text);
  EXPECT_EQ(c.peft_type, "LORA");
  EXPECT_EQ(c.task_type, "SEQ_CLS");
  EXPECT_EQ(c.base_model_name_or_path, "gpt2");
  EXPECT_EQ(c.r, 8);
  EXPECT_EQ(c.lora_alpha, 32.0);
  EXPECT_DOUBLE_EQ(c.lora_dropout, 0.1);
  EXPECT_TRUE(c.fan_in_fan_out);
  EXPECT_EQ(c.bias, "none");
  EXPECT_FALSE(c.use_rslora);
  EXPECT_FALSE(c.use_dora);
  EXPECT_EQ(c.target_modules.form, ModuleSelector::Form::kList);
  EXPECT_EQ(c.target_modules.names, Names({"c_proj", "c_attn"}));  // file order
  EXPECT_EQ(c.exclude_modules.form, ModuleSelector::Form::kNone);
  EXPECT_EQ(c.modules_to_save, Names({"classifier", "score"}));
  EXPECT_EQ(c.init_lora_weights, "true");
  EXPECT_TRUE(c.rank_pattern.empty());
  EXPECT_TRUE(c.alpha_pattern.empty());
  EXPECT_FALSE(c.peft_version.has_value());  // written by PEFT < 0.18
  EXPECT_TRUE(c.unknown_keys.empty());
  // The document is kept as read, key order and int-ness included.
  EXPECT_EQ(c.document.begin().key(), "alpha_pattern");
  EXPECT_TRUE(c.document["lora_alpha"].is_number_integer());
  EXPECT_EQ(c.document.size(), 29u);
}

TEST(LoraConfig, RobertaFixtureParsesWithPeftValues) {
  auto text = FixtureConfig("peft-roberta-seqcls-query-value");
  if (!text) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  LoraConfig c = MustParse(*text);
  EXPECT_EQ(c.r, 8);
  EXPECT_EQ(c.lora_alpha, 16.0);
  EXPECT_EQ(c.lora_dropout, 0.0);
  EXPECT_FALSE(c.fan_in_fan_out);
  EXPECT_EQ(c.target_modules.names, Names({"query", "value"}));
  EXPECT_EQ(c.modules_to_save, Names({"classifier", "score"}));
  EXPECT_EQ(c.peft_version, "0.18.2.dev0@UNKNOWN");
  EXPECT_EQ(c.base_model_name_or_path, "roberta-base");
  EXPECT_TRUE(c.unknown_keys.empty());
}

TEST(LoraConfig, AlpacaEraConfigWithEnableLoraAndMergeWeights) {
  // The shape of PEFT <= 0.2 files (alpaca-lora): enable_lora and merge_weights are known, not unknown.
  LoraConfig c = MustParse(R"({"base_model_name_or_path": "decapoda-research/llama-7b-hf", "bias": "none",
      "enable_lora": null, "fan_in_fan_out": false, "inference_mode": true, "lora_alpha": 16,
      "lora_dropout": 0.05, "merge_weights": false, "modules_to_save": null, "peft_type": "LORA", "r": 16,
      "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"})");
  EXPECT_EQ(c.r, 16);
  EXPECT_EQ(c.lora_alpha, 16.0);
  EXPECT_EQ(c.task_type, "CAUSAL_LM");
  EXPECT_TRUE(c.modules_to_save.empty());
  EXPECT_TRUE(c.unknown_keys.empty());
  EXPECT_EQ(c.init_lora_weights, "true");  // absent: PEFT's default
  // A real MergedLinear layout is refused.
  auto merged = ParseLoraConfig(R"({"peft_type": "LORA", "enable_lora": [true, false, true]})");
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.error().code, ErrorCode::UnsupportedAdapter);
  EXPECT_NE(merged.error().message.find("enable_lora"), std::string::npos);
}

TEST(LoraConfig, MinimalConfigTakesPeftDefaults) {
  LoraConfig c = MustParse(R"({"peft_type": "LORA", "target_modules": ["q"]})");
  EXPECT_EQ(c.r, 8);
  EXPECT_EQ(c.lora_alpha, 8.0);
  EXPECT_EQ(c.lora_dropout, 0.0);
  EXPECT_EQ(c.bias, "none");
  EXPECT_FALSE(c.task_type.has_value());
  EXPECT_FALSE(c.lora_bias);
  EXPECT_TRUE(c.layers_to_transform.empty());
  EXPECT_FALSE(c.trainable_token_indices.has_value());
}

TEST(LoraConfig, UnknownKeysAreReportedInFileOrderAndKept) {
  LoraConfig c = MustParse(
      R"({"zeta": 1, "peft_type": "LORA", "runtime_config": {"ephemeral_gpu_offload": false}, "my_note": null})");
  EXPECT_EQ(c.unknown_keys, Names({"zeta", "my_note"}));  // runtime_config is a PEFT field (0.12)
  EXPECT_EQ(c.document["zeta"], 1);
}

TEST(LoraConfig, ValueFormsPeftAccepts) {
  LoraConfig c = MustParse(R"({"peft_type": "LORA", "lora_alpha": 16.5, "layers_to_transform": 3,
      "layers_pattern": "layers", "target_modules": ["q_proj"], "init_lora_weights": "gaussian",
      "trainable_token_indices": [1, 2], "rank_pattern": {"z": 4, "a": 2}, "alpha_pattern": {"v": 0.5},
      "exclude_modules": ".*lm_head", "task_type": null, "lora_dropout": null})");
  EXPECT_EQ(c.lora_alpha, 16.5);
  EXPECT_EQ(c.layers_to_transform, std::vector<int64_t>{3});
  EXPECT_EQ(c.layers_pattern, Names({"layers"}));
  EXPECT_EQ(c.init_lora_weights, "gaussian");
  ASSERT_TRUE(c.trainable_token_indices.has_value());
  EXPECT_EQ(*c.trainable_token_indices, Json::parse("[1, 2]"));
  ASSERT_EQ(c.rank_pattern.size(), 2u);  // file order, not sorted
  EXPECT_EQ(c.rank_pattern[0], std::make_pair(std::string("z"), int64_t{4}));
  EXPECT_EQ(c.rank_pattern[1], std::make_pair(std::string("a"), int64_t{2}));
  EXPECT_EQ(c.alpha_pattern[0].second, 0.5);
  EXPECT_EQ(c.exclude_modules.form, ModuleSelector::Form::kRegex);
  EXPECT_EQ(c.exclude_modules.regex, ".*lm_head");
  // Initialisation-only modes are fine for a trained adapter; booleans become "true" / "false".
  for (auto [json, mode] : std::vector<std::pair<std::string, std::string>>{
           {R"("eva")", "eva"}, {R"("orthogonal")", "orthogonal"}, {"false", "false"}, {"true", "true"}}) {
    LoraConfig m = MustParse(R"({"peft_type": "LORA", "init_lora_weights": )" + json + "}");
    EXPECT_EQ(m.init_lora_weights, mode);
  }
  // LoRA on parameters (MoE experts): kept in file order.
  EXPECT_EQ(
      MustParse(R"({"peft_type": "LORA", "target_parameters": ["mlp.experts.down_proj", "experts.gate_up_proj"]})")
          .target_parameters,
      (std::vector<std::string>{"mlp.experts.down_proj", "experts.gate_up_proj"}));
  // Variant switches in their "off" state are plain LoRA.
  MustParse(R"({"peft_type": "LORA", "alora_invocation_tokens": null, "target_parameters": [], "use_qalora": false,
      "layer_replication": null, "megatron_config": null, "use_bdlora": null, "arrow_config": null,
      "monteclora_config": null, "kasa_config": null, "velora_config": {"rank": 4}, "eva_config": {"rho": 2}})");
}

TEST(LoraConfig, AllLinearIsRecognisedCaseInsensitively) {
  EXPECT_TRUE(MustParse(R"({"peft_type": "LORA", "target_modules": "all-linear"})").target_modules.is_all_linear());
  EXPECT_TRUE(MustParse(R"({"peft_type": "LORA", "target_modules": "ALL-Linear"})").target_modules.is_all_linear());
  EXPECT_FALSE(MustParse(R"({"peft_type": "LORA", "target_modules": ["all-linear"]})").target_modules.is_all_linear());
}

struct Refusal {
  std::string json;
  ErrorCode code;
  std::string message_part;
};

void ExpectRefusals(const std::vector<Refusal>& cases) {
  for (const Refusal& r : cases) {
    auto c = ParseLoraConfig(r.json);
    ASSERT_FALSE(c.ok()) << r.json;
    EXPECT_EQ(c.error().code, r.code) << r.json << "\n" << c.error().message;
    EXPECT_NE(c.error().message.find(r.message_part), std::string::npos) << r.json << "\n" << c.error().message;
  }
}

TEST(LoraConfig, MalformedConfigsAreInvalid) {
  constexpr auto kInvalid = ErrorCode::InvalidConfig;
  auto lora = [](const std::string& fields) { return R"({"peft_type": "LORA", )" + fields + "}"; };
  ExpectRefusals({
      {"{\"peft_type\": ", kInvalid, "not valid JSON"},
      {"[1, 2]", kInvalid, "JSON object"},
      {R"({"r": 8})", kInvalid, "`peft_type` is required"},
      {R"({"peft_type": 3})", kInvalid, "`peft_type` must be a string"},
      {R"({"peft_type": "lora"})", kInvalid, "\"LORA\""},
      {lora(R"("r": -1)"), kInvalid, "adapter_config.json: `r` must be a positive integer, found -1"},
      {lora(R"("r": 0)"), kInvalid, "found 0"},
      {lora(R"("r": 8.0)"), kInvalid, "found 8.0"},
      {lora(R"("r": "8")"), kInvalid, "found \"8\""},
      {lora(R"("r": null)"), kInvalid, "`r`"},
      {lora(R"("r": 18446744073709551615)"), kInvalid, "`r`"},
      {lora(R"("lora_alpha": "16")"), kInvalid, "`lora_alpha` must be a number"},
      {lora(R"("lora_alpha": null)"), kInvalid, "`lora_alpha`"},
      {lora(R"("bias": "some")"), kInvalid, "`bias`"},
      {lora(R"("task_type": "CLASSIFY")"), kInvalid, "`task_type` \"CLASSIFY\""},
      {lora(R"("task_type": 1)"), kInvalid, "`task_type`"},
      {lora(R"("target_modules": 5)"), kInvalid, "`target_modules`"},
      {lora(R"("target_modules": ["q", 1])"), kInvalid, "`target_modules` must be a list of strings, found 1"},
      {lora(R"("modules_to_save": "score")"), kInvalid, "`modules_to_save`"},
      {lora(R"("layers_to_transform": [1.5])"), kInvalid, "`layers_to_transform`"},
      {lora(R"("layers_to_transform": true)"), kInvalid, "`layers_to_transform`"},
      {lora(R"("layers_pattern": 1)"), kInvalid, "`layers_pattern`"},
      {lora(R"("rank_pattern": {"q": 0})"), kInvalid, "`rank_pattern`"},
      {lora(R"("rank_pattern": {"q": 2.5})"), kInvalid, "`rank_pattern`"},
      {lora(R"("rank_pattern": null)"), kInvalid, "`rank_pattern`"},
      {lora(R"("alpha_pattern": {"q": "x"})"), kInvalid, "`alpha_pattern`"},
      {lora(R"("fan_in_fan_out": "yes")"), kInvalid, "`fan_in_fan_out` must be true or false"},
      {lora(R"("use_rslora": 1)"), kInvalid, "`use_rslora`"},
      {lora(R"("init_lora_weights": 1)"), kInvalid, "`init_lora_weights`"},
      {lora(R"("init_lora_weights": "xavier")"), kInvalid, "unknown `init_lora_weights` \"xavier\""},
      {lora(R"("init_lora_weights": "pissa_fast")"), kInvalid, "pissa_niter_"},
      {lora(R"("trainable_token_indices": 5)"), kInvalid, "`trainable_token_indices`"},
      {lora(R"("velora_config": 3)"), kInvalid, "`velora_config`"},
      {lora(R"("target_parameters": "experts")"), kInvalid, "`target_parameters`"},
      // LoraConfig.__post_init__ contradictions.
      {lora(R"("target_modules": ".*q", "layers_to_transform": [0])"), kInvalid, "`layers_to_transform` cannot"},
      {lora(R"("target_modules": ".*q", "layers_pattern": "layers")"), kInvalid, "`layers_pattern` cannot"},
      {lora(R"("target_modules": ["q"], "layers_pattern": "layers")"), kInvalid, "requires `layers_to_transform`"},
      {lora(R"("use_dora": true, "megatron_config": {"tp": 2})"), kInvalid, "`megatron_config`"},
      {lora(R"("init_lora_weights": "loftq", "loftq_config": {})"), kInvalid, "`loftq_config`"},
      {lora(R"("lora_bias": true, "init_lora_weights": "gaussian")"), kInvalid, "`lora_bias`"},
      {lora(R"("lora_bias": true, "use_dora": true)"), kInvalid, "`lora_bias`"},
      // Patterns peft-bridge cannot run exactly as Python would.
      {lora(R"j("target_modules": "(?P<m>.*q_proj)")j"), kInvalid, "`target_modules` regex"},
      {lora(R"("rank_pattern": {"(?<=self_attn\\.)q_proj": 4})"), kInvalid, "`rank_pattern` key"},
      {lora(R"("alpha_pattern": {"q_proj\\Z": 4})"), kInvalid, "`alpha_pattern` key"},
      {lora(R"j("exclude_modules": "(a")j"), kInvalid, "`exclude_modules` regex"},
      // PEFT's ParamWrapper raises on these, so PEFT cannot load such an adapter.
      {lora(R"("target_parameters": ["experts.gate_up_proj"], "use_dora": true)"), kInvalid,
       "`use_dora`: PEFT's ParamWrapper"},
      {lora(R"("target_parameters": ["experts.gate_up_proj"], "lora_dropout": 0.05)"), kInvalid, "`lora_dropout`"},
      {lora(R"("target_parameters": ["experts.gate_up_proj"], "fan_in_fan_out": true)"), kInvalid, "`fan_in_fan_out`"},
      {lora(R"("target_parameters": ["experts.gate_up_proj"], "lora_bias": true)"), kInvalid, "`lora_bias`"},
      {lora(R"("target_parameters": [3])"), kInvalid, "`target_parameters`"},
  });
}

TEST(LoraConfig, AdaptersPeftBridgeCannotMergeAreUnsupported) {
  constexpr auto kUnsupported = ErrorCode::UnsupportedAdapter;
  auto lora = [](const std::string& fields) { return R"({"peft_type": "LORA", )" + fields + "}"; };
  ExpectRefusals({
      {R"({"peft_type": "LOHA", "r": 8})", kUnsupported, "LOHA adapters are not supported yet; only LORA"},
      {R"({"peft_type": "ADALORA"})", kUnsupported, "ADALORA"},
      {R"({"peft_type": "IA3"})", kUnsupported, "IA3"},
      {lora(R"("init_lora_weights": "pissa")"), kUnsupported,
       "init_lora_weights=\"pissa\" rewrites the base weights when PEFT loads the adapter; convert it with PEFT's "
       "path_initial_model_for_weight_conversion first"},
      {lora(R"("init_lora_weights": "pissa_niter_16")"), kUnsupported, "pissa_niter_16"},
      {lora(R"("init_lora_weights": "olora")"), kUnsupported, "olora"},
      {lora(R"("init_lora_weights": "corda")"), kUnsupported, "corda"},
      {lora(R"("init_lora_weights": "lora_ga")"), kUnsupported, "lora_ga"},
      {lora(R"("init_lora_weights": "loftq", "loftq_config": {"loftq_bits": 4})"), kUnsupported, "LoftQ"},
      {lora(R"("init_lora_weights": "mica")"), kUnsupported, "MiCA"},
      {lora(R"("alora_invocation_tokens": [1, 2])"), kUnsupported, "alora_invocation_tokens"},
      {lora(R"("use_bdlora": {"nblocks": 2})"), kUnsupported, "use_bdlora"},
      {lora(R"("arrow_config": {"top_k": 3})"), kUnsupported, "arrow_config"},
      {lora(R"("monteclora_config": {})"), kUnsupported, "monteclora_config"},
      {lora(R"("kasa_config": {})"), kUnsupported, "kasa_config"},
      {lora(R"("use_qalora": true)"), kUnsupported, "use_qalora"},
      {lora(R"("layer_replication": [[0, 4], [2, 6]])"), kUnsupported, "layer_replication"},
      {lora(R"("megatron_config": {"tensor_model_parallel_size": 2})"), kUnsupported, "megatron_config"},
  });
}

TEST(LoraConfig, DefaultDocumentIsThePinnedPeftsFreshConfig) {
  Json d = adapter::DefaultLoraConfigDocument();
  ASSERT_EQ(d.size(), 41u);
  std::vector<std::string> keys;
  for (auto it = d.begin(); it != d.end(); ++it) keys.push_back(it.key());
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(keys.front(), "alora_invocation_tokens");
  EXPECT_EQ(keys.back(), "velora_config");
  EXPECT_EQ(d["r"], 8);
  EXPECT_TRUE(d["lora_alpha"].is_number_integer());
  EXPECT_TRUE(d["lora_dropout"].is_number_float());
  EXPECT_EQ(d["bias"], "none");
  EXPECT_EQ(d["inference_mode"], true);
  EXPECT_EQ(d["init_lora_weights"], true);
  EXPECT_EQ(d["loftq_config"], Json::object());
  EXPECT_EQ(d["megatron_core"], "megatron.core");
  EXPECT_EQ(d["qalora_group_size"], 16);
  EXPECT_EQ(d["peft_type"], "LORA");
  // PEFT never writes a null peft_version (its __post_init__ fills it), so neither do we.
  EXPECT_EQ(d["peft_version"], std::string(adapter::kPeftSchemaVersion));
  EXPECT_TRUE(d["target_modules"].is_null());
  // It reads back as a plain LoRA with nothing unknown.
  LoraConfig c = MustParse(d.dump());
  EXPECT_TRUE(c.unknown_keys.empty());
  EXPECT_EQ(c.r, 8);
}

TEST(LoraConfig, Pre014FieldsAreThoseOfPeft013) {
  const std::vector<const char*> pre014 = {// PeftConfig, then LoraConfig as of 0.13
                                           "peft_type",
                                           "task_type",
                                           "auto_mapping",
                                           "base_model_name_or_path",
                                           "revision",
                                           "inference_mode",
                                           "r",
                                           "target_modules",
                                           "lora_alpha",
                                           "lora_dropout",
                                           "fan_in_fan_out",
                                           "bias",
                                           "use_rslora",
                                           "modules_to_save",
                                           "init_lora_weights",
                                           "layers_to_transform",
                                           "layers_pattern",
                                           "rank_pattern",
                                           "alpha_pattern",
                                           "megatron_config",
                                           "megatron_core",
                                           "loftq_config",
                                           "use_dora",
                                           "layer_replication",
                                           "runtime_config"};
  for (const char* key : pre014) EXPECT_TRUE(adapter::IsPre014LoraField(key)) << key;
  for (const char* key : {"exclude_modules", "eva_config", "lora_bias", "peft_version", "trainable_token_indices",
                          "use_qalora", "enable_lora", "merge_weights", "kasa_config", "nonsense"})
    EXPECT_FALSE(adapter::IsPre014LoraField(key)) << key;
}

}  // namespace
}  // namespace pb::testing

namespace pb::adapter {
namespace {

// Found by fuzzing: a config nested 100,000 levels deep overflowed the stack when it was written back out.
TEST(LoraConfig, DeeplyNestedDocumentsAreRefusedNotOverflowed) {
  std::string deep =
      R"({"peft_type": "LORA", "loftq_config": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto r = ParseLoraConfig(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::InvalidConfig);
  EXPECT_NE(r.error().message.find("deeper than 128"), std::string::npos) << r.error().message;
  std::string ok =
      R"({"peft_type": "LORA", "loftq_config": {}, "x": )" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_TRUE(ParseLoraConfig(ok).ok());
  EXPECT_FALSE(WithinDepth(Json::parse(std::string(200, '[') + std::string(200, ']'))));
}

}  // namespace
}  // namespace pb::adapter
