// Module selection and per-module rank/alpha, matched the way PEFT matches them (check_target_module_exists,
// get_pattern_key). The regex engine under both has its own tests (python_regex_test.cc).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "adapter/module_select.h"
#include "text/python_regex.h"
#include "adapter/adapter_io.h"
#include "adapter_fixtures.h"
#include "test_util.h"

namespace pb::testing {
namespace {

using adapter::IsTargeted;
using adapter::LoraConfig;
using adapter::ResolveModuleSettings;

LoraConfig Config(const std::string& fields) {
  auto c = adapter::ParseLoraConfig(R"({"peft_type": "LORA", )" + fields + "}");
  EXPECT_TRUE(c.ok()) << fields << "\n" << c.error().message;
  return c.ok() ? c.value() : LoraConfig{};
}

TEST(IsTargeted, Gpt2SuffixMatchesBothCProjModules) {
  LoraConfig c;
  if (auto root = FixturesDir()) {
    Bytes b = ReadAll(*root / "peft-gpt2-seqcls-cattn-cproj" / "adapter_config.json");
    auto parsed = adapter::ParseLoraConfig(std::string(b.begin(), b.end()));
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    c = parsed.value();
  } else {
    c = Config(R"("target_modules": ["c_proj", "c_attn"], "modules_to_save": ["classifier", "score"])");
  }
  EXPECT_EQ(IsTargeted(c, "transformer.h.0.attn.c_attn"), true);
  EXPECT_EQ(IsTargeted(c, "transformer.h.0.attn.c_proj"), true);
  EXPECT_EQ(IsTargeted(c, "transformer.h.11.mlp.c_proj"), true);  // the same suffix, in the MLP
  EXPECT_EQ(IsTargeted(c, "transformer.h.0.mlp.c_fc"), false);
  EXPECT_EQ(IsTargeted(c, "transformer.h.0.attn.my_c_proj"), false);  // suffixes start at a dot
  EXPECT_EQ(IsTargeted(c, "c_proj"), true);                           // exact name
  EXPECT_EQ(IsTargeted(c, "score"), false);
}

TEST(IsTargeted, ListEntriesWithDotsMatchDottedSuffixes) {
  LoraConfig c = Config(R"("target_modules": ["self_attn.q_proj", "v_proj"])");
  EXPECT_EQ(IsTargeted(c, "model.layers.0.self_attn.q_proj"), true);
  EXPECT_EQ(IsTargeted(c, "model.layers.0.cross_attn.q_proj"), false);
  EXPECT_EQ(IsTargeted(c, "model.layers.0.xself_attn.q_proj"), false);
  EXPECT_EQ(IsTargeted(c, "self_attn.q_proj"), true);
  EXPECT_EQ(IsTargeted(c, "model.layers.3.self_attn.v_proj"), true);
}

TEST(IsTargeted, RegexMustMatchTheWholeName) {
  LoraConfig c = Config(R"("target_modules": ".*decoder.*(q|v)_proj")");
  EXPECT_EQ(IsTargeted(c, "model.decoder.layers.0.self_attn.q_proj"), true);
  EXPECT_EQ(IsTargeted(c, "model.encoder.layers.0.self_attn.q_proj"), false);
  EXPECT_EQ(IsTargeted(c, "model.decoder.layers.0.self_attn.q_proj.lora"), false);  // fullmatch, not search
  LoraConfig bare = Config(R"("target_modules": "q_proj")");
  EXPECT_EQ(IsTargeted(bare, "model.layers.0.self_attn.q_proj"), false);  // a regex is not a suffix
  EXPECT_EQ(IsTargeted(bare, "q_proj"), true);
}

TEST(IsTargeted, ExcludeModulesListAndRegex) {
  LoraConfig list =
      Config(R"("target_modules": ["q_proj", "v_proj"], "exclude_modules": ["layers.1.self_attn.q_proj"])");
  EXPECT_EQ(IsTargeted(list, "model.layers.1.self_attn.q_proj"), false);
  EXPECT_EQ(IsTargeted(list, "model.layers.1.self_attn.v_proj"), true);
  EXPECT_EQ(IsTargeted(list, "model.layers.11.self_attn.q_proj"), true);
  LoraConfig regex = Config(R"("target_modules": ["q_proj"], "exclude_modules": ".*\\.layers\\.[01]\\..*")");
  EXPECT_EQ(IsTargeted(regex, "model.layers.0.self_attn.q_proj"), false);
  EXPECT_EQ(IsTargeted(regex, "model.layers.2.self_attn.q_proj"), true);
  EXPECT_EQ(IsTargeted(regex, "model.layers.10.self_attn.q_proj"), true);
  // Exclusion is decided before target_modules, so it holds even when targets come from the model type.
  LoraConfig untargeted = Config(R"("exclude_modules": ["lm_head"])");
  EXPECT_EQ(IsTargeted(untargeted, "lm_head"), false);
  EXPECT_EQ(IsTargeted(untargeted, "model.layers.0.self_attn.q_proj"), std::nullopt);
}

TEST(IsTargeted, ModulesToSaveAreNeverLoraTargets) {
  LoraConfig c = Config(R"("target_modules": ["dense", "query"], "modules_to_save": ["classifier"])");
  EXPECT_EQ(IsTargeted(c, "classifier.dense"), false);
  EXPECT_EQ(IsTargeted(c, "roberta.classifier.dense"), false);
  EXPECT_EQ(IsTargeted(c, "roberta.encoder.layer.0.output.dense"), true);
  EXPECT_EQ(IsTargeted(c, "my_classifier.dense"), true);  // (^|.*\.)classifier needs a dot boundary
}

TEST(IsTargeted, NullAndAllLinearNeedTheModel) {
  EXPECT_EQ(IsTargeted(Config(R"("target_modules": null)"), "model.layers.0.self_attn.q_proj"), std::nullopt);
  EXPECT_EQ(IsTargeted(Config(R"("target_modules": "all-linear")"), "model.layers.0.self_attn.q_proj"), std::nullopt);
}

TEST(IsTargeted, LayersToTransformWithoutPattern) {
  LoraConfig c = Config(R"("target_modules": ["q_proj"], "layers_to_transform": [0, 2])");
  EXPECT_EQ(IsTargeted(c, "model.layers.0.self_attn.q_proj"), true);
  EXPECT_EQ(IsTargeted(c, "model.layers.1.self_attn.q_proj"), false);
  EXPECT_EQ(IsTargeted(c, "model.layers.2.self_attn.q_proj"), true);
  EXPECT_EQ(IsTargeted(c, "transformer.h.2.attn.q_proj"), true);  // any "<segment>.<n>." counts
  EXPECT_EQ(IsTargeted(c, "lm.q_proj"), false);                   // no layer index at all
  EXPECT_EQ(IsTargeted(c, "q_proj"), true);                       // an exact entry skips the layer filter in PEFT
  // PEFT tests len(layers_pattern) == 0: an empty string means the default rule, like null.
  LoraConfig empty = Config(R"("target_modules": ["q_proj"], "layers_to_transform": [0], "layers_pattern": "")");
  EXPECT_EQ(IsTargeted(empty, "model.layers.0.self_attn.q_proj"), true);
  LoraConfig single = Config(R"("target_modules": ["q_proj"], "layers_to_transform": 1)");
  EXPECT_EQ(IsTargeted(single, "model.layers.1.self_attn.q_proj"), true);
  EXPECT_EQ(IsTargeted(single, "model.layers.10.self_attn.q_proj"), false);
}

TEST(IsTargeted, LazyLayerIndexPicksTheLayerNotTheExpert) {
  // PEFT >= 0.20 takes the first numbered segment; <= 0.19's greedy regex took the expert index (0).
  LoraConfig layer1 = Config(R"("target_modules": ["w1"], "layers_to_transform": [1])");
  EXPECT_EQ(IsTargeted(layer1, "model.layers.1.experts.0.w1"), true);
  LoraConfig layer0 = Config(R"("target_modules": ["w1"], "layers_to_transform": [0])");
  EXPECT_EQ(IsTargeted(layer0, "model.layers.1.experts.0.w1"), false);
  LoraConfig patterned = Config(R"("target_modules": ["w1"], "layers_to_transform": [1], "layers_pattern": "layers")");
  EXPECT_EQ(IsTargeted(patterned, "model.layers.1.experts.0.w1"), true);
}

TEST(IsTargeted, LayersPatternNamesTheLayerList) {
  LoraConfig c =
      Config(R"("target_modules": ["c_attn"], "layers_to_transform": [3], "layers_pattern": ["layers", "h"])");
  EXPECT_EQ(IsTargeted(c, "transformer.h.3.attn.c_attn"), true);
  EXPECT_EQ(IsTargeted(c, "transformer.h.4.attn.c_attn"), false);
  EXPECT_EQ(IsTargeted(c, "model.blocks.3.attn.c_attn"), false);  // neither pattern appears
  // A capturing group in layers_pattern would become PEFT's group(1): refused when the config is read.
  auto bad = adapter::ParseLoraConfig(R"j({"peft_type": "LORA", "target_modules": ["q"],
      "layers_to_transform": [0], "layers_pattern": "(layers|h)"})j");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::InvalidConfig);
  EXPECT_NE(bad.error().message.find("`layers_pattern`"), std::string::npos) << bad.error().message;
}

TEST(ModuleSettings, RankPatternFirstMatchInFileOrder) {
  const std::string name = "model.layers.0.self_attn.q_proj";
  auto suffix_first = ResolveModuleSettings(
      Config(R"("r": 8, "rank_pattern": {"q_proj": 16, "model.layers.0.self_attn.q_proj": 32})"), name);
  EXPECT_EQ(suffix_first.r, 16);
  EXPECT_EQ(suffix_first.rank_pattern_key, "q_proj");
  auto full_first = ResolveModuleSettings(
      Config(R"("r": 8, "rank_pattern": {"model.layers.0.self_attn.q_proj": 32, "q_proj": 16})"), name);
  EXPECT_EQ(full_first.r, 32);
  EXPECT_EQ(full_first.rank_pattern_key, "model.layers.0.self_attn.q_proj");
}

TEST(ModuleSettings, AnchoredFullNamesAndSuffixBoundaries) {
  LoraConfig c = Config(R"("r": 8, "rank_pattern": {"^model.layers.0.self_attn.q_proj": 4, "proj": 2})");
  EXPECT_EQ(ResolveModuleSettings(c, "model.layers.0.self_attn.q_proj").r, 4);
  EXPECT_EQ(ResolveModuleSettings(c, "model.layers.10.self_attn.q_proj").r, 8);
  EXPECT_EQ(ResolveModuleSettings(c, "base.model.layers.0.self_attn.q_proj").r, 8);  // ^ anchors the name
  EXPECT_EQ(ResolveModuleSettings(c, "model.proj").r, 2);
  EXPECT_FALSE(ResolveModuleSettings(c, "model.layers.1.mlp.up_proj").rank_pattern_key.has_value());
  // Dots in keys are regex wildcards, as in Python.
  LoraConfig dotted = Config(R"("rank_pattern": {"layers.1.mlp": 6})");
  EXPECT_EQ(ResolveModuleSettings(dotted, "model.layers_1_mlp").r, 6);
}

TEST(ModuleSettings, RankAndAlphaResolveIndependently) {
  LoraConfig c = Config(R"("r": 8, "lora_alpha": 16, "rank_pattern": {"q_proj": 16}, "alpha_pattern": {"v_proj": 64})");
  auto q = ResolveModuleSettings(c, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(q.r, 16);
  EXPECT_EQ(q.alpha, 16.0);
  EXPECT_EQ(q.scaling, 1.0);
  EXPECT_EQ(q.rank_pattern_key, "q_proj");
  EXPECT_FALSE(q.alpha_pattern_key.has_value());
  auto v = ResolveModuleSettings(c, "model.layers.0.self_attn.v_proj");
  EXPECT_EQ(v.r, 8);
  EXPECT_EQ(v.alpha, 64.0);
  EXPECT_EQ(v.scaling, 8.0);
  EXPECT_EQ(v.alpha_pattern_key, "v_proj");
  auto k = ResolveModuleSettings(c, "model.layers.0.self_attn.k_proj");
  EXPECT_EQ(k.scaling, 2.0);
  auto fractional = ResolveModuleSettings(Config(R"("r": 3, "lora_alpha": 1)"), "x");
  EXPECT_EQ(fractional.scaling, 1.0 / 3.0);
}

TEST(ModuleSettings, RsLoraDividesBySqrtRank) {
  LoraConfig c = Config(R"("r": 16, "lora_alpha": 32, "use_rslora": true, "rank_pattern": {"v_proj": 8})");
  EXPECT_EQ(ResolveModuleSettings(c, "layers.0.q_proj").scaling, 8.0);
  EXPECT_EQ(ResolveModuleSettings(c, "layers.0.v_proj").scaling, 32.0 / std::sqrt(8.0));
}
}  // namespace
}  // namespace pb::testing

namespace pb::testing {
namespace {

// A regression: std::regex recursed per character and crashed on one 40,000-character module path.
TEST(ModuleSelectHostile, VeryLongModulePathsAreMatchedWithoutCrashing) {
  LoraConfig c = Config(R"("target_modules": ".*\\.q_proj", "modules_to_save": ["classifier"],
                           "rank_pattern": {"q_proj": 4, "k_proj": 2}, "alpha_pattern": {"layer7\\..*": 3})");
  LoraConfig list = Config(R"("target_modules": ["q_proj"], "modules_to_save": ["classifier"],
                              "layers_to_transform": [7])");
  for (size_t length : {size_t{40000}, size_t{1000000}}) {
    std::string path;
    for (int i = 0; path.size() < length; ++i) path += "block" + std::to_string(i) + ".";
    std::string q = path + "q_proj", saved = path + "classifier.dense";
    EXPECT_EQ(IsTargeted(c, q), true) << length;
    EXPECT_EQ(IsTargeted(c, path + "v_proj"), false);
    EXPECT_EQ(IsTargeted(c, saved), false);
    EXPECT_EQ(IsTargeted(list, q), false);  // no ".<segment>.<n>." in it: no layer index
    EXPECT_EQ(IsTargeted(list, "x.layer.7." + q), true);
    auto s = ResolveModuleSettings(c, q);
    EXPECT_EQ(s.r, 4);
    EXPECT_EQ(s.rank_pattern_key, "q_proj");
    EXPECT_EQ(ResolveModuleSettings(c, path + "k_proj").r, 2);
    EXPECT_EQ(ResolveModuleSettings(c, "layer7." + q).alpha, 3.0);
  }
  // A string target_modules that would be catastrophic for a backtracking engine.
  LoraConfig nested = Config(R"("target_modules": "(a+)+$")");
  EXPECT_EQ(IsTargeted(nested, std::string(28, 'a') + "!"), false);
  EXPECT_EQ(IsTargeted(nested, std::string(10000, 'a')), true);
}

TEST(ModuleSelectHostile, PatternsAreCompiledOncePerConfig) {
  std::string keys;
  for (int k = 0; k < 50000; ++k)
    keys += (k ? ", " : "") + std::string("\"model\\\\.layers\\\\.") + std::to_string(k) +
            "\\\\.self_attn\\\\.q_proj\": " + std::to_string(k % 7 + 1);
  auto start = std::chrono::steady_clock::now();
  LoraConfig c = Config("\"r\": 8, \"rank_pattern\": {" + keys + "}");
  double parse = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_NE(c.patterns, nullptr);
  LoraConfig copy = c;
  EXPECT_EQ(copy.patterns, c.patterns);  // copies share the compiled patterns
  start = std::chrono::steady_clock::now();
  int64_t total = 0;
  for (int m = 0; m < 200; ++m) {
    // Half the modules hit a key (late in the file for the last ones), half hit none of the 50,000.
    std::string name =
        "model.layers." + std::to_string(m < 100 ? m * 499 : m) + ".self_attn." + (m < 100 ? "q_proj" : "v_proj");
    auto s = ResolveModuleSettings(c, name);
    EXPECT_EQ(s.r, m < 100 ? (m * 499) % 7 + 1 : 8) << name;
    total += s.r;
  }
  double match = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("50000 rank_pattern keys: parse+compile %.2f s, 200 modules resolved in %.2f s\n", parse, match);
  EXPECT_GT(total, 0);
}

// Plain entries (letters, digits, _ and -) are looked up by segment instead of run as regexes: the same
// answers as the regex PEFT builds, on names with dots, empty segments, newlines and entries as substrings.
TEST(ModulesToSave, PlainEntriesBySegmentAgreeWithPeftsRegex) {
  const std::vector<std::string> entries = {"ab", "b", "a_b", "b-a", "ba"};
  std::string list;
  for (const auto& e : entries) list += (list.empty() ? "\"" : ", \"") + e + "\"";
  // target_modules "(.|\n)*" matches every name, so IsTargeted is false exactly for the saved ones.
  LoraConfig c = Config(R"("target_modules": "(.|\\n)*", "modules_to_save": [)" + list + "]");
  ASSERT_NE(c.patterns, nullptr);
  EXPECT_EQ(c.patterns->saved_module_names.size(), entries.size());
  EXPECT_TRUE(c.patterns->modules_to_save.empty());
  std::vector<text::PythonRegex> peft;
  for (const auto& e : entries) peft.push_back(text::CompilePythonRegex("(^|.*\\.)" + e + "($|\\..*)").value());
  const char alphabet[] = {'a', 'b', '.', '\n', '_', '-'};
  uint64_t state = 12345;
  int saved = 0;
  for (int k = 0; k < 20000; ++k) {
    std::string name;
    size_t len = 1 + (k % 9);
    for (size_t i = 0; i < len; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      name += alphabet[(state >> 33) % sizeof alphabet];
    }
    bool expect_saved = false;
    for (const auto& re : peft) expect_saved = expect_saved || re.Match(name);
    saved += expect_saved;
    EXPECT_EQ(IsTargeted(c, name), !expect_saved) << "name \"" << name << "\"";
  }
  EXPECT_GT(saved, 100);  // the generator reaches both answers
  // The edges by hand: a final newline ends a segment; an earlier one stops `.*`.
  EXPECT_EQ(IsTargeted(c, "x.ab\n"), false);
  EXPECT_EQ(IsTargeted(Config(R"("target_modules": ["ab"], "modules_to_save": ["ab"])"), "x\ny.ab"), true);
  EXPECT_EQ(IsTargeted(c, "x.abc.y"), true);
}

// The fuzz finding (fuzz/corpus_seeds/adapter_readers-modules_to_save-x-long-name): 16,437 entries against
// a 200,000-character module name. Repeated entries are matched once; distinct regex entries past the
// work limit end in a precise error, in bounded time.
TEST(ModulesToSave, ManyEntriesAgainstALongNameAreBounded) {
  auto read = [](const std::string& entries, const std::string& module) {
    std::vector<GenTensor> t;
    AddLinear(t, module, 1, 1, 1);
    GeneratedAdapter g{
        PeftConfig(R"("r": 1, "lora_alpha": 1, "target_modules": ["a"], "modules_to_save": [)" + entries + "]"),
        BuildSafetensors(t, 1), std::nullopt};
    auto start = std::chrono::steady_clock::now();
    auto r = adapter::ReadAdapter(g.source(), {});
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 20.0);
    return r;
  };
  const std::string long_name = "x." + std::string(200000, 'a') + ".a";
  std::string repeated, distinct;
  for (int k = 0; k < 16437; ++k) {
    repeated += std::string(k ? ", " : "") + R"(".lora_A.weight#")";
    distinct += std::string(k ? ", " : "") + "\"z." + std::to_string(k) + "\"";
  }
  auto once = read(repeated, long_name);
  ASSERT_TRUE(once.ok()) << once.error().message;
  EXPECT_EQ(once->adapter.modules.size(), 1u);
  auto bounded = read(distinct, long_name);
  ASSERT_FALSE(bounded.ok());
  EXPECT_EQ(bounded.error().code, ErrorCode::InvalidConfig);
  EXPECT_NE(bounded.error().message.find("modules_to_save"), std::string::npos) << bounded.error().message;
  // The allowance: 2^22 steps and 16 per byte of the two tensor names.
  const uint64_t name_bytes =
      2 * (std::string("base_model.model.").size() + long_name.size() + std::string(".lora_A.weight").size());
  EXPECT_NE(bounded.error().message.find(" " + std::to_string((uint64_t{1} << 22) + 16 * name_bytes) + " regex steps"),
            std::string::npos)
      << bounded.error().message;
  // The same entries against ordinary names fit easily.
  auto fits = read(distinct, "model.layers.0.a");
  ASSERT_TRUE(fits.ok()) << fits.error().message;
}

// A DeepSeek-V3-shaped MoE adapter: 89,088 tensors (58 layers x 256 experts x gate/up/down) against the ordinary
// `.*\.(gate_proj|up_proj|down_proj)$`. Its size alone once spent a fixed step budget; the allowance grows with the
// names matched, so it reads, while the many-patterns case above stays bounded.
TEST(TargetModules, AnOrdinaryRegexOverAMoeSizedAdapterIsNotRefusedForItsSize) {
  std::vector<GenTensor> t;
  for (int layer = 3; layer < 61; ++layer)
    for (int expert = 0; expert < 256; ++expert)
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"})
        AddLinear(t, "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(expert) + "." + proj, 1,
                  1, 1);
  ASSERT_EQ(t.size(), 89088u);
  GeneratedAdapter g{PeftConfig(R"("r": 1, "lora_alpha": 1, "target_modules": ".*\\.(gate_proj|up_proj|down_proj)$")"),
                     BuildSafetensors(t, 1), std::nullopt};
  auto read = adapter::ReadAdapter(g.source(), {});
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->adapter.modules.size(), 44544u);
}

TEST(RegexWorkLimit, CountsStepsNestsAndStopsMatching) {
  auto re = text::CompilePythonRegex("(a|b)*c").value();
  const std::string text = std::string(1000, 'a') + "c";
  {
    text::RegexWorkLimit outer(1u << 20);
    {
      text::RegexWorkLimit inner(10);
      EXPECT_FALSE(re.FullMatch(text));  // true without a limit: the limit answers false
      EXPECT_TRUE(inner.exceeded());
    }
    EXPECT_FALSE(outer.exceeded());
    EXPECT_TRUE(re.FullMatch(text));
    EXPECT_FALSE(outer.exceeded());
  }
  EXPECT_TRUE(re.FullMatch(text));
}

}  // namespace
}  // namespace pb::testing
