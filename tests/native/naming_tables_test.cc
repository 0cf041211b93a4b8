// The naming tables: every shipped table parses and round-trips each of its names; detection on adapters
// other tools wrote (tests/fixtures); llama.cpp's row permutations against hand-computed orders; and the
// errors a malformed table gets.
#include "adapter/naming_tables.h"
#include "app/user_naming_tables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "core/header.h"
#include "test_util.h"

namespace pb::adapter {
namespace {

const NamingTables& B() { return NamingTables::Builtin(); }

const ArchTable& Arch(std::string_view name) {
  const ArchTable* t = B().Find(name);
  EXPECT_NE(t, nullptr) << name;
  static const ArchTable empty;
  return t ? *t : empty;
}

std::string Stem(std::string_view path) {
  std::string s(path.substr(path.find_last_of('/') + 1));
  return s.substr(0, s.size() - 5);
}

// ---- Shipped tables ----------------------------------------------------------------------------------------

TEST(NamingTables, EveryShippedTableParses) {
  std::set<std::string> stems;
  for (const auto& f : EmbeddedNamingFiles()) {
    if (!f.path.starts_with("arch/")) continue;
    EmbeddedFile one[] = {f};
    auto t = NamingTables::Parse(one);
    ASSERT_TRUE(t.ok()) << t.error().message;
    ASSERT_EQ(t->arches().size(), 1u);
    EXPECT_EQ(t->arches()[0].name, Stem(f.path));
    stems.insert(Stem(f.path));
  }
  std::set<std::string> builtin;
  for (const auto& a : B().arches()) builtin.insert(a.name);
  EXPECT_EQ(builtin, stems);
  for (const char* name : {"llama", "qwen2", "gemma", "gemma2", "gpt2", "gpt_neox", "gptj", "gpt_neo", "falcon", "phi",
                           "phi3", "bert", "roberta", "distilbert", "t5"})
    EXPECT_TRUE(builtin.count(name)) << name;
}

TEST(NamingTables, EmbeddedFilesAreTheDataFilesByteForByte) {
  size_t arch_files = 0;
  for (const auto& f : EmbeddedNamingFiles()) {
    auto disk = testing::ReadAll(std::filesystem::path(PB_SOURCE_DIR) / "data" / "naming" / std::string(f.path));
    EXPECT_EQ(std::string(disk.begin(), disk.end()), f.text) << f.path;
    arch_files += f.path.starts_with("arch/");
  }
  EXPECT_GE(arch_files, 60u);
}

TEST(NamingTables, NoTwoShippedTablesClaimTheSameConfigName) {
  std::set<std::string> model_types, architectures;
  for (const auto& a : B().arches()) {
    for (const auto& m : a.model_types) EXPECT_TRUE(model_types.insert(m).second) << a.name << " " << m;
    for (const auto& c : a.architectures) EXPECT_TRUE(architectures.insert(c).second) << a.name << " " << c;
  }
}

// Every template of every table, {N} = 3, under every body prefix: HF -> canonical / GGUF -> HF again.
TEST(NamingTables, EveryTemplateRoundTrips) {
  const NamingTables& tables = B();
  for (const auto& a : tables.arches()) {
    for (const auto& t : a.modules) {
      auto fill = [](std::string s) {
        if (size_t at = s.find("{N}"); at != std::string::npos) s.replace(at, 3, "3");
        return s;
      };
      bool layered = t.hf.find("{N}") != std::string::npos;
      for (const auto& prefix : a.body_prefixes) {
        std::string hf = (t.head ? "" : prefix) + fill(t.hf);
        SCOPED_TRACE(a.name + ": " + hf);
        auto m = tables.MatchHf(a, hf);
        ASSERT_TRUE(m);
        // A T5 wi and wi_1 share their canonical name; the hf path decides which template matched.
        EXPECT_EQ(m->tmpl->hf, t.hf);
        EXPECT_EQ(m->hf, hf);
        EXPECT_EQ(m->prefix, t.head ? "" : prefix);
        EXPECT_EQ(m->layer, layered ? std::optional<uint64_t>(3) : std::nullopt);
        EXPECT_EQ(m->canonical, fill(t.canonical));
        EXPECT_EQ(m->gguf, t.gguf ? std::optional<std::string>(fill(*t.gguf)) : std::nullopt);

        auto c = tables.FromCanonical(a, m->canonical, prefix);
        ASSERT_TRUE(c);
        EXPECT_EQ(c->canonical, m->canonical);
        EXPECT_EQ(c->gguf, m->gguf);
        // Shared canonical names (T5 wi_1 / wi) come back as the first template listed.
        auto first = std::find_if(a.modules.begin(), a.modules.end(),
                                  [&](const ModuleTemplate& o) { return o.canonical == t.canonical; });
        EXPECT_EQ(c->tmpl, &*first);
        if (c->tmpl == &t) {
          EXPECT_EQ(c->hf, hf);
        }

        if (t.gguf) {
          auto g = tables.FromGguf(a, *m->gguf, prefix);
          ASSERT_TRUE(g);
          EXPECT_EQ(g->tmpl, &*first);
          EXPECT_EQ(g->canonical, m->canonical);
          if (g->tmpl == &t) {
            EXPECT_EQ(g->hf, hf);
          }
          auto g2 = tables.FromGguf(a, *m->gguf + ".weight", prefix);
          ASSERT_TRUE(g2);
          EXPECT_EQ(g2->hf, g->hf);
        }
      }
    }
  }
}

TEST(NamingTables, EveryTemplateRoundTripsUnderscored) {
  const NamingTables& tables = B();
  for (const auto& a : tables.arches()) {
    for (const auto& t : a.modules) {
      for (const auto& prefix : a.body_prefixes) {
        std::string hf = (t.head ? "" : prefix) + t.hf;
        if (size_t at = hf.find("{N}"); at != std::string::npos) hf.replace(at, 3, "3");
        std::string underscored = hf;
        std::replace(underscored.begin(), underscored.end(), '.', '_');
        SCOPED_TRACE(a.name + ": " + underscored);
        auto m = tables.FromUnderscored(a, underscored);
        ASSERT_TRUE(m);
        EXPECT_EQ(m->hf, hf);
        EXPECT_EQ(m->tmpl, &t);
      }
    }
  }
}

TEST(NamingTables, MatchHfDetails) {
  const NamingTables& tables = B();
  auto m = tables.MatchHf(Arch("llama"), "model.layers.12.self_attn.k_proj");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->arch->name, "llama");
  EXPECT_EQ(m->prefix, "model.");
  EXPECT_EQ(m->layer, 12u);
  EXPECT_EQ(m->canonical, "layers/12/attention/key");
  EXPECT_EQ(m->gguf, "blk.12.attn_k");
  ASSERT_TRUE(m->tmpl->gguf_permute);
  EXPECT_EQ(m->tmpl->gguf_permute->kind, adapter::RowPermutationKind::kLlamaRope);
  EXPECT_EQ(m->tmpl->gguf_permute->heads, adapter::HeadCountField::kKeyValueHeads);
  EXPECT_EQ(tables.MatchHf(Arch("llama"), "layers.0.mlp.up_proj")->prefix, "");
  EXPECT_EQ(tables.MatchHf(Arch("llama"), "lm_head")->gguf, "output");
  EXPECT_FALSE(tables.MatchHf(Arch("gemma"), "lm_head")->gguf);  // llama.cpp drops Gemma's tied head
  EXPECT_FALSE(tables.MatchHf(Arch("qwen2"), "model.layers.0.self_attn.q_proj")->tmpl->gguf_permute);
  // Layer indices are plain decimal, as HF writes them.
  EXPECT_FALSE(tables.MatchHf(Arch("llama"), "model.layers.03.self_attn.q_proj"));
  EXPECT_FALSE(tables.MatchHf(Arch("llama"), "model.layers.-1.self_attn.q_proj"));
  EXPECT_FALSE(tables.MatchHf(Arch("llama"), "model.layers..self_attn.q_proj"));
  EXPECT_FALSE(tables.MatchHf(Arch("llama"), "model.layers.1x.self_attn.q_proj"));
  EXPECT_FALSE(tables.MatchHf(Arch("llama"), "model.layers.0.self_attn.q_proj.lora_A"));
  EXPECT_TRUE(tables.MatchHf(Arch("llama"), "model.layers.0.self_attn.q_proj"));
  // A head is a full path: no body prefix before it.
  EXPECT_FALSE(tables.MatchHf(Arch("llama"), "model.lm_head"));
  EXPECT_EQ(tables.MatchHf(Arch("gpt2"), "h.11.mlp.c_fc")->tmpl->kind, ModuleKind::kConv1D);
  EXPECT_EQ(tables.MatchHf(Arch("gpt_neo"), "transformer.h.11.mlp.c_fc")->tmpl->kind, ModuleKind::kLinear);
  EXPECT_EQ(tables.MatchHf(Arch("t5"), "transformer.decoder.block.2.layer.1.EncDecAttention.o")->gguf,
            "dec.blk.2.cross_attn_o");
  EXPECT_FALSE(tables.FromCanonical(Arch("llama"), "layers/1/attention/query", "bert."));  // not a body prefix
  EXPECT_EQ(tables.FromCanonical(Arch("llama"), "head/lm", "model.")->hf, "lm_head");
  EXPECT_EQ(tables.FromGguf(Arch("gpt_neox"), "blk.7.attn_qkv", "gpt_neox.")->hf,
            "gpt_neox.layers.7.attention.query_key_value");
  EXPECT_FALSE(tables.FromGguf(Arch("gpt_neo"), "blk.0.attn_q", ""));
  EXPECT_EQ(ModuleKindName(ModuleKind::kConv1D), "conv1d");
  EXPECT_EQ(ModuleKindName(ModuleKind::kEmbedding), "embedding");
}

TEST(NamingTables, FromUnderscoredNeedsExactlyOneReading) {
  EXPECT_EQ(B().FromUnderscored(Arch("llama"), "model_layers_0_self_attn_q_proj")->hf,
            "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(B().FromUnderscored(Arch("t5"), "encoder_block_5_layer_1_DenseReluDense_wi_1")->hf,
            "encoder.block.5.layer.1.DenseReluDense.wi_1");
  EXPECT_FALSE(B().FromUnderscored(Arch("llama"), "model_layers_0_self_attn_q_projx"));
  // A template's '.' reads either '.' or '_', so a dotted path resolves too.
  EXPECT_EQ(B().FromUnderscored(Arch("llama"), "model.layers.0.self_attn.q_proj")->hf,
            "model.layers.0.self_attn.q_proj");
  // "mlp_up.proj" and "mlp.up_proj" both read "mlp_up_proj": no answer rather than a guess.
  EmbeddedFile files[] = {{"arch/clash.json", R"({"model_types": [], "architectures": [], "body_prefixes": [""],
    "modules": [{"hf": "layers.{N}.mlp_up.proj", "canonical": "a/{N}", "kind": "linear"},
                {"hf": "layers.{N}.mlp.up_proj", "canonical": "b/{N}", "kind": "linear"}]})"}};
  auto t = NamingTables::Parse(files);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_FALSE(t->FromUnderscored(t->arches()[0], "layers_2_mlp_up_proj"));
  EXPECT_EQ(t->MatchHf(t->arches()[0], "layers.2.mlp.up_proj")->canonical, "b/2");
}

TEST(NamingTables, ATableHasAtMostAThousandTemplatesAndSixteenPrefixes) {
  // Every lookup tries each template under each prefix: the limits bound it whatever table a user supplies.
  auto table = [](size_t templates, size_t prefixes) {
    std::string t = R"({"model_types": [], "architectures": [], "body_prefixes": [)";
    for (size_t i = 0; i < prefixes; ++i) t += (i ? ",\"p" : "\"p") + std::to_string(i) + ".\"";
    t += R"(], "modules": [)";
    for (size_t i = 0; i < templates; ++i)
      t += (i ? "," : "") + std::string(R"({"hf": "layers.{N}.m)") + std::to_string(i) + R"(", "canonical": "c)" +
           std::to_string(i) + R"(/{N}", "kind": "linear"})";
    return t + "]}";
  };
  std::string ok = table(kMaxTemplates, kMaxBodyPrefixes), templates = table(kMaxTemplates + 1, 1),
              prefixes = table(1, kMaxBodyPrefixes + 1);
  EmbeddedFile at_limit[] = {{"arch/big.json", ok}}, too_many[] = {{"arch/big.json", templates}},
               too_wide[] = {{"arch/wide.json", prefixes}};
  EXPECT_TRUE(NamingTables::Parse(at_limit).ok());
  auto refused = NamingTables::Parse(too_many);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::InvalidConfig);
  EXPECT_NE(refused.error().message.find("modules: lists 1001 module templates; at most 1000"), std::string::npos)
      << refused.error().message;
  auto wide = NamingTables::Parse(too_wide);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().message.find("body_prefixes: lists 17 prefixes; at most 16"), std::string::npos)
      << wide.error().message;
}

// ---- Choosing a table --------------------------------------------------------------------------------------

TEST(NamingTables, FromModelConfig) {
  auto arch_of = [](const std::string& config) {
    const ArchTable* t = B().FromModelConfig(config);
    return t ? t->name : std::string("(none)");
  };
  EXPECT_EQ(arch_of(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 32,
                        "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "bfloat16"})"),
            "llama");
  EXPECT_EQ(arch_of(R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
                        "n_embd": 768, "n_head": 12, "n_layer": 12})"),
            "gpt2");
  EXPECT_EQ(arch_of(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "num_attention_heads": 14,
                        "num_key_value_heads": 2, "tie_word_embeddings": true})"),
            "qwen2");
  EXPECT_EQ(arch_of(R"({"architectures": ["RobertaForSequenceClassification"], "model_type": "roberta",
                        "id2label": {"0": "LABEL_0", "1": "LABEL_1"}})"),
            "roberta");
  EXPECT_EQ(arch_of(R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral"})"), "llama");
  EXPECT_EQ(arch_of(R"({"architectures": ["T5ForConditionalGeneration"], "model_type": "t5",
                        "feed_forward_proj": "gated-gelu"})"),
            "t5");
  EXPECT_EQ(arch_of(R"({"architectures": ["RWForCausalLM"], "model_type": "RefinedWebModel"})"), "falcon");
  EXPECT_EQ(arch_of(R"({"architectures": ["DistilBertForSequenceClassification"], "model_type": "distilbert"})"),
            "distilbert");
  EXPECT_EQ(arch_of(R"({"architectures": ["PhiForCausalLM"], "model_type": "phi"})"), "phi");
  EXPECT_EQ(arch_of(R"({"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox"})"), "gpt_neox");
  // architectures first, then model_type; entries that name nothing known are skipped.
  EXPECT_EQ(arch_of(R"({"architectures": ["MyLlamaVariant", "Gemma2ForCausalLM"], "model_type": "llama"})"), "gemma2");
  EXPECT_EQ(arch_of(R"({"architectures": ["MyLlamaVariant"], "model_type": "phi3"})"), "phi3");
  EXPECT_EQ(arch_of(R"({"model_type": "gpt_neo"})"), "gpt_neo");
  EXPECT_EQ(arch_of(R"({"architectures": "LlamaForCausalLM"})"), "(none)");
  EXPECT_EQ(arch_of(R"({"architectures": [1, null], "model_type": 7})"), "(none)");
  EXPECT_EQ(arch_of("[]"), "(none)");
  EXPECT_EQ(arch_of("not json"), "(none)");
}

TEST(NamingTables, FindByNameModelTypeOrArchitecture) {
  EXPECT_EQ(B().Find("llama")->name, "llama");
  EXPECT_EQ(B().Find("mistral")->name, "llama");
  EXPECT_EQ(B().Find("xlm-roberta")->name, "roberta");
  EXPECT_EQ(B().Find("GPT2ForSequenceClassification")->name, "gpt2");
  EXPECT_EQ(B().Find("Llama"), nullptr);  // exact
  EXPECT_EQ(B().Find(""), nullptr);
}

// Module paths of an adapter file: PEFT's base_model.model. prefix and the LoRA factor suffixes removed; full
// weights (modules_to_save) give their module.
std::vector<std::string> ModulePaths(const std::filesystem::path& file) {
  auto bytes = testing::ReadAll(file);
  auto h = ParseWholeFile(bytes);
  EXPECT_TRUE(h.ok()) << file;
  std::set<std::string> out;
  if (!h.ok()) return {};
  for (size_t i = 0; i < h->tensor_count(); ++i) {
    std::string name(h->tensor(i).name);
    if (name.starts_with("base_model.model.")) name.erase(0, 17);
    bool lora = false;
    for (std::string_view s : {".lora_A.weight", ".lora_B.weight", ".lora_a", ".lora_b"}) {
      if (name.ends_with(s)) {
        name.resize(name.size() - s.size());
        lora = true;
        break;
      }
    }
    if (!lora) name.resize(name.find_last_of('.'));
    out.insert(name);
  }
  return {out.begin(), out.end()};
}

TEST(NamingTables, DetectsPeftGpt2) {
  auto dir = testing::FixturesDir();
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  auto paths = ModulePaths(*dir / "peft-gpt2-seqcls-cattn-cproj" / "adapter_model.safetensors");
  ASSERT_EQ(paths.size(), 37u);  // 12 layers x (c_attn, attn.c_proj, mlp.c_proj) + score
  const ArchTable* t = B().Detect(paths);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "gpt2");
  for (const auto& p : paths) EXPECT_TRUE(B().MatchHf(*t, p)) << p;
  auto m = B().MatchHf(*t, "transformer.h.0.attn.c_attn");
  EXPECT_EQ(m->tmpl->kind, ModuleKind::kConv1D);
  EXPECT_EQ(m->gguf, "blk.0.attn_qkv");
  EXPECT_EQ(B().MatchHf(*t, "transformer.h.5.mlp.c_proj")->canonical, "layers/5/mlp/down");
  EXPECT_EQ(B().MatchHf(*t, "score")->canonical, "head/score");
}

TEST(NamingTables, DetectsPeftRoberta) {
  auto dir = testing::FixturesDir();
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  auto paths = ModulePaths(*dir / "peft-roberta-seqcls-query-value" / "adapter_model.safetensors");
  ASSERT_EQ(paths.size(), 26u);  // 12 layers x (query, value) + classifier.dense + classifier.out_proj
  const ArchTable* t = B().Detect(paths);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "roberta");
  for (const auto& p : paths) EXPECT_TRUE(B().MatchHf(*t, p)) << p;
  EXPECT_EQ(B().MatchHf(*t, "roberta.encoder.layer.11.attention.self.value")->gguf, "blk.11.attn_v");
  EXPECT_EQ(B().MatchHf(*t, "classifier.out_proj")->gguf, "cls.output");
}

// Qwen2 shares every module name with LLaMA / Mistral / Gemma: names alone pick the llama-family table with the
// highest detect_priority (llama); the config picks qwen2, whose templates match the same modules.
TEST(NamingTables, DetectsMlxQwen2AsTheLlamaFamily) {
  auto dir = testing::FixturesDir();
  if (!dir) PB_SKIP_WITHOUT_FIXTURE() << "no tests/fixtures or ../shared/fixtures";
  auto paths = ModulePaths(*dir / "mlx-lm-qwen2.5-0.5b" / "adapters.safetensors");
  ASSERT_EQ(paths.size(), 8u);  // layers 20-23 x (q_proj, v_proj)
  const ArchTable* t = B().Detect(paths);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "llama");
  const ArchTable* qwen2 = B().FromModelConfig(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"})");
  ASSERT_NE(qwen2, nullptr);
  EXPECT_EQ(qwen2->name, "qwen2");
  for (const auto& p : paths) {
    EXPECT_TRUE(B().MatchHf(*t, p)) << p;
    auto m = B().MatchHf(*qwen2, p);
    ASSERT_TRUE(m) << p;
    EXPECT_FALSE(m->tmpl->gguf_permute);  // llama.cpp keeps Qwen2's q rows in HF order
  }
  EXPECT_EQ(B().MatchHf(*qwen2, "model.layers.20.self_attn.q_proj")->gguf, "blk.20.attn_q");
}

TEST(NamingTables, DetectCountsMatchesAndBreaksTies) {
  std::vector<std::string> phi = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.dense",
                                  "model.layers.0.mlp.fc1"};
  EXPECT_EQ(B().Detect(phi)->name, "phi");  // q_proj alone would tie with the llama family
  std::vector<std::string> phi3 = {"model.layers.1.self_attn.qkv_proj", "model.layers.1.mlp.gate_up_proj",
                                   "model.layers.1.self_attn.o_proj"};
  EXPECT_EQ(B().Detect(phi3)->name, "phi3");
  std::vector<std::string> neo = {"transformer.h.0.attn.attention.q_proj", "transformer.h.0.mlp.c_fc"};
  EXPECT_EQ(B().Detect(neo)->name, "gpt_neo");
  std::vector<std::string> t5 = {"encoder.block.0.layer.0.SelfAttention.q",
                                 "decoder.block.0.layer.1.EncDecAttention.v"};
  EXPECT_EQ(B().Detect(t5)->name, "t5");
  std::vector<std::string> distil = {"distilbert.transformer.layer.0.attention.q_lin"};
  EXPECT_EQ(B().Detect(distil)->name, "distilbert");
  std::vector<std::string> nothing = {"unet.down_blocks.0.attentions.0.proj_in", "foo"};
  EXPECT_EQ(B().Detect(nothing), nullptr);
  EXPECT_EQ(B().Detect(std::span<const std::string>()), nullptr);
}

// ---- Row permutations ---------------------------------------------------------------------------------------

bool IsPermutation(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != i) return false;
  return true;
}

TEST(NamingGgufRowOrder, KindAndHeadNamesRoundTrip) {
  for (auto kind : {RowPermutationKind::kLlamaRope, RowPermutationKind::kFalconQkv, RowPermutationKind::kGptNeoxQkv})
    EXPECT_EQ(ParseRowPermutationKind(RowPermutationKindName(kind)), kind);
  for (auto field : {HeadCountField::kAttentionHeads, HeadCountField::kKeyValueHeads})
    EXPECT_EQ(ParseHeadCountField(HeadCountFieldName(field)), field);
  EXPECT_EQ(RowPermutationKindName(RowPermutationKind::kFalconQkv), "falcon_qkv");
  EXPECT_EQ(HeadCountFieldName(HeadCountField::kKeyValueHeads), "num_key_value_heads");
  EXPECT_FALSE(ParseRowPermutationKind("rope"));
  EXPECT_FALSE(ParseHeadCountField("n_head"));
}

TEST(NamingGgufRowOrder, LlamaRopeHandComputed) {
  // w.reshape(2, 2, 2).swapaxes(1, 2): per head of 4 rows [a0 a1 b0 b1] -> [a0 b0 a1 b1].
  RowPermutation q{RowPermutationKind::kLlamaRope, HeadCountField::kAttentionHeads};
  auto o = GgufRowOrder(q, 8, 2, 0);
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o.value(), (std::vector<uint64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  // One head of 8 rows: [0 1 2 3 | 4 5 6 7] -> 0 4 1 5 2 6 3 7.
  EXPECT_EQ(GgufRowOrder(q, 8, 1, 0).value(), (std::vector<uint64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  // k: llama.cpp splits by the KV head count when the config has one (permute(w, n_head, n_head_kv)).
  RowPermutation k{RowPermutationKind::kLlamaRope, HeadCountField::kKeyValueHeads};
  EXPECT_EQ(GgufRowOrder(k, 8, 8, 2).value(), (std::vector<uint64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(GgufRowOrder(k, 8, 2, 0).value(), (std::vector<uint64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(GgufRowOrder(k, 8, 4, 0).value(), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7}));  // 4 heads of 2
  // q ignores the KV head count.
  EXPECT_EQ(GgufRowOrder(q, 8, 2, 1).value(), GgufRowOrder(q, 8, 2, 0).value());
}

TEST(NamingGgufRowOrder, LlamaRopeMatchesTheReshapeAtScale) {
  RowPermutation q{RowPermutationKind::kLlamaRope, HeadCountField::kAttentionHeads};
  for (uint64_t heads : {1u, 2u, 4u, 32u}) {
    for (uint64_t head_dim : {2u, 8u, 128u}) {
      uint64_t rows = heads * head_dim;
      auto o = GgufRowOrder(q, rows, heads, 0);
      ASSERT_TRUE(o.ok());
      ASSERT_TRUE(IsPermutation(o.value()));
      // Index arithmetic of reshape(heads, 2, d/2).swapaxes(1, 2): destination (h, j, t) <- source (h, t, j).
      for (uint64_t h = 0; h < heads; ++h)
        for (uint64_t t = 0; t < 2; ++t)
          for (uint64_t j = 0; j < head_dim / 2; ++j)
            ASSERT_EQ(o.value()[(h * head_dim / 2 + j) * 2 + t], (h * 2 + t) * (head_dim / 2) + j);
    }
  }
}

TEST(NamingGgufRowOrder, FalconAndNeoxHandComputed) {
  // Falcon, 4 heads in 2 KV groups, head size 1: rows [q0 q1 k0 v0 | q2 q3 k1 v1] -> q0 q1 q2 q3 k0 k1 v0 v1.
  RowPermutation falcon{RowPermutationKind::kFalconQkv, HeadCountField::kAttentionHeads};
  EXPECT_EQ(GgufRowOrder(falcon, 8, 4, 2).value(), (std::vector<uint64_t>{0, 1, 4, 5, 2, 6, 3, 7}));
  // Head size 2: each entry above becomes two consecutive rows.
  EXPECT_EQ(GgufRowOrder(falcon, 16, 4, 2).value(),
            (std::vector<uint64_t>{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15}));
  // Multi-query Falcon (one KV head, llama.cpp's default): already q, k, v.
  EXPECT_EQ(GgufRowOrder(falcon, 6, 4, 0).value(), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
  // GPT-NeoX, 2 heads of size 1: [q0 k0 v0 q1 k1 v1] -> q0 q1 k0 k1 v0 v1.
  RowPermutation neox{RowPermutationKind::kGptNeoxQkv, HeadCountField::kAttentionHeads};
  EXPECT_EQ(GgufRowOrder(neox, 6, 2, 0).value(), (std::vector<uint64_t>{0, 3, 1, 4, 2, 5}));
  for (uint64_t heads : {1u, 3u, 8u}) {
    EXPECT_TRUE(IsPermutation(GgufRowOrder(neox, heads * 3 * 16, heads, 0).value()));
    EXPECT_TRUE(IsPermutation(GgufRowOrder(falcon, (heads * 2 + 2 * 2) * 16, heads * 2, 2).value()));
  }
}

TEST(NamingGgufRowOrder, RejectsShapesItCannotSplit) {
  auto code = [](const Result<std::vector<uint64_t>>& r) {
    return r.ok() ? std::string("ok") : std::string(ErrorCodeName(r.error().code));
  };
  EXPECT_EQ(code(GgufRowOrder({RowPermutationKind::kLlamaRope, HeadCountField::kAttentionHeads}, 6, 4, 0)),
            "InvalidArgument");
  EXPECT_EQ(code(GgufRowOrder({RowPermutationKind::kLlamaRope, HeadCountField::kAttentionHeads}, 6, 2, 0)),
            "InvalidArgument");  // odd head size
  EXPECT_EQ(code(GgufRowOrder({RowPermutationKind::kLlamaRope, HeadCountField::kAttentionHeads}, 8, 0, 0)),
            "InvalidArgument");
  EXPECT_EQ(code(GgufRowOrder({RowPermutationKind::kFalconQkv, HeadCountField::kAttentionHeads}, 8, 3, 2)),
            "InvalidArgument");
  EXPECT_EQ(code(GgufRowOrder({RowPermutationKind::kFalconQkv, HeadCountField::kAttentionHeads}, 9, 4, 2)),
            "InvalidArgument");
  EXPECT_EQ(code(GgufRowOrder({RowPermutationKind::kGptNeoxQkv, HeadCountField::kAttentionHeads}, 8, 2, 0)),
            "InvalidArgument");
  EXPECT_EQ(code(GgufRowOrder({RowPermutationKind::kLlamaRope, HeadCountField::kAttentionHeads}, 0, 2, 0)), "ok");
}

TEST(NamingGgufRowOrder, HeadCountsFromConfig) {
  auto c = HeadCountsFromConfig(R"({"num_attention_heads": 32, "num_key_value_heads": 8})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->heads, 32u);
  EXPECT_EQ(c->kv_heads, 8u);
  c = HeadCountsFromConfig(R"({"n_head": 71, "multi_query": true})");  // Falcon-7B: no KV count, llama.cpp uses 1
  ASSERT_TRUE(c);
  EXPECT_EQ(c->heads, 71u);
  EXPECT_EQ(c->kv_heads, 0u);
  EXPECT_EQ(HeadCountsFromConfig(R"({"num_attention_heads": 128, "num_kv_heads": 8})")->kv_heads, 8u);
  EXPECT_FALSE(HeadCountsFromConfig(R"({"hidden_size": 8})"));
  EXPECT_FALSE(HeadCountsFromConfig(R"({"num_attention_heads": -1})"));
  EXPECT_FALSE(HeadCountsFromConfig("nope"));
}

// ---- Malformed tables ---------------------------------------------------------------------------------------

std::string ParseError(const std::string& text) {
  EmbeddedFile files[] = {{"arch/bad.json", text}};
  auto t = NamingTables::Parse(files);
  if (t.ok()) return "ok";
  EXPECT_EQ(t.error().code, ErrorCode::InvalidConfig);
  return t.error().message;
}

std::string Table(const std::string& modules, const std::string& extra = "") {
  return R"({"model_types": ["x"], "architectures": ["X"], "body_prefixes": ["model.", ""])" + extra +
         R"(, "modules": [)" + modules + "]}";
}

const std::string kGood = R"({"hf": "layers.{N}.q", "canonical": "layers/{N}/attention/query", "gguf": "blk.{N}.attn_q",
                              "kind": "linear"})";

TEST(NamingTables, RejectsBadTablesNamingFileAndField) {
  EXPECT_EQ(ParseError(Table(kGood)), "ok");
  EXPECT_EQ(ParseError("{"),
            "arch/bad.json: not valid JSON at byte 1: syntax error while parsing object key - unexpected end of input; "
            "expected string literal");
  EXPECT_EQ(ParseError("[" + std::string(200, '[')), "arch/bad.json: nesting deeper than 128 levels at byte 128");
  EXPECT_EQ(ParseError("[]"), "arch/bad.json: a table must be a JSON object");
  EXPECT_EQ(ParseError(R"({"model_types": ["x"], "architectures": [], "body_prefixes": [""]})"),
            "arch/bad.json: modules: must be a non-empty array of module objects");
  EXPECT_EQ(ParseError(R"({"model_types": "x", "architectures": [], "body_prefixes": [""], "modules": [1]})"),
            "arch/bad.json: model_types: must be an array of strings");
  EXPECT_EQ(ParseError(R"({"model_types": [], "architectures": [1], "body_prefixes": [""], "modules": [1]})"),
            "arch/bad.json: architectures[0]: must be a string");
  EXPECT_EQ(ParseError(R"({"model_types": [], "architectures": [], "body_prefixes": ["model"], "modules": [1]})"),
            "arch/bad.json: body_prefixes[0]: \"model\" must be empty or end with '.'");
  EXPECT_EQ(ParseError(Table(kGood, R"(, "gguf_arch": 3)")),
            "arch/bad.json: gguf_arch: must be a non-empty string (or absent: llama.cpp has no such architecture)");
  EXPECT_EQ(ParseError(Table(kGood, R"(, "gguf_architecture": "x")")),
            "arch/bad.json: gguf_architecture: unknown field");
  for (const char* priority : {"1.5", "1001", "-1001", "18446744073709551615", "\"1\""})
    EXPECT_EQ(ParseError(Table(kGood, std::string(R"(, "detect_priority": )") + priority)),
              "arch/bad.json: detect_priority: must be an integer from -1000 to 1000")
        << priority;
  EXPECT_EQ(ParseError(Table(kGood, R"(, "detect_priority": -1000)")), "ok");
  EXPECT_EQ(ParseError(Table("1")), "arch/bad.json: modules[0]: must be an object");
  EXPECT_EQ(ParseError(Table(kGood + R"(, {"canonical": "c", "kind": "linear"})")),
            "arch/bad.json: modules[1].hf: is required");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "lin"})")),
            "arch/bad.json: modules[0].kind: \"lin\" is not one of linear, conv1d, embedding, conv2d, other");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c"})")),
            "arch/bad.json: modules[0].kind: is required: one of linear, conv1d, embedding, conv2d, other");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "linear", "gguf_permutation": {}})")),
            "arch/bad.json: modules[0].gguf_permutation: unknown field");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "linear", "head": "yes"})")),
            "arch/bad.json: modules[0].head: must be true or false");
  EXPECT_EQ(ParseError(Table(R"({"hf": "layers.{N}.{N}", "canonical": "c/{N}/{N}", "kind": "linear"})")),
            "arch/bad.json: modules[0].hf: \"layers.{N}.{N}\" may hold one {N} and no other braces");
  EXPECT_EQ(ParseError(Table(R"({"hf": "layers.{N}.q", "canonical": "c", "kind": "linear"})")),
            "arch/bad.json: modules[0]: hf, canonical and gguf must each hold {N} once, or none of them");
  EXPECT_EQ(ParseError(Table(R"({"hf": "layers.{n}.q", "canonical": "c", "kind": "linear"})")),
            "arch/bad.json: modules[0].hf: \"layers.{n}.q\" may hold one {N} and no other braces");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q.", "canonical": "c", "kind": "linear"})")),
            "arch/bad.json: modules[0].hf: \"q.\" must not start or end with '.'");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "gguf": "output.weight", "kind": "linear"})")),
            "arch/bad.json: modules[0].gguf: is the tensor's base name, without \".weight\"");
  EXPECT_EQ(ParseError(Table(kGood + "," + kGood)),
            "arch/bad.json: modules[1].hf: \"layers.{N}.q\" repeats modules[0]");
  EXPECT_EQ(ParseError(Table(kGood + R"(, {"hf": "layers.{N}.k", "canonical": "layers/{N}/k", "gguf": "blk.{N}.attn_q",
                                         "kind": "linear"})")),
            "arch/bad.json: modules[1].gguf: \"blk.{N}.attn_q\" repeats modules[0] under another canonical name");
  EXPECT_EQ(ParseError(Table(kGood + R"(, {"hf": "layers.{N}.k", "canonical": "layers/{N}/attention/query",
                                         "kind": "linear"})")),
            "arch/bad.json: modules[1].canonical: \"layers/{N}/attention/query\" repeats modules[0] with another gguf "
            "name, kind or head flag");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "linear",
                                 "gguf_permute": {"kind": "llama_rope", "heads": "num_attention_heads"}})")),
            "arch/bad.json: modules[0].gguf_permute: needs a gguf name: it describes how llama.cpp writes that tensor");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "gguf": "g", "kind": "linear",
                                 "gguf_permute": {"kind": "rope", "heads": "num_attention_heads"}})")),
            "arch/bad.json: modules[0].gguf_permute.kind: must be one of llama_rope, falcon_qkv, gptneox_qkv");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "gguf": "g", "kind": "linear",
                                 "gguf_permute": {"kind": "llama_rope", "heads": "n_head"}})")),
            "arch/bad.json: modules[0].gguf_permute.heads: must be num_attention_heads or num_key_value_heads");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "gguf": "g", "kind": "linear",
                                 "gguf_permute": {"kind": "llama_rope", "heads": "num_attention_heads", "x": 1}})")),
            "arch/bad.json: modules[0].gguf_permute.x: unknown field");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "linear", "note": 5})")),
            "arch/bad.json: modules[0].note: must be a string");
  EXPECT_EQ(
      ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "linear", "tied_to": ""})")),
      "arch/bad.json: modules[0].tied_to: must be the non-empty hf path of the module whose weight this one shares");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "linear", "fused": ["query"]})")),
            "arch/bad.json: modules[0].fused: must be an array of at least two role names, in row order");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "linear", "fused": ["query", 1]})")),
            "arch/bad.json: modules[0].fused[1]: must be a non-empty string");
  EXPECT_EQ(ParseError(Table(R"({"hf": "q", "canonical": "c", "kind": "linear", "fused": ["gate", "up"],
                                 "tied_to": "embed_tokens"})")),
            "ok");
}

// What the generator records beyond names (tests/golden/naming/generate.py): ties and fused projections.
TEST(NamingTables, ShippedTablesRecordTiesAndFusedProjections) {
  const NamingTables& tables = B();
  auto module = [&](const char* arch, const char* hf) -> const ModuleTemplate* {
    const ArchTable* t = tables.Find(arch);
    if (!t) return nullptr;
    for (const auto& m : t->modules)
      if (m.hf == hf) return &m;
    return nullptr;
  };
  const ModuleTemplate* gemma_head = module("gemma", "lm_head");
  ASSERT_NE(gemma_head, nullptr);
  EXPECT_EQ(gemma_head->tied_to, "embed_tokens");
  const ModuleTemplate* llama_head = module("llama", "lm_head");
  ASSERT_NE(llama_head, nullptr);
  EXPECT_FALSE(llama_head->tied_to);
  const ModuleTemplate* qkv = module("phi3", "layers.{N}.self_attn.qkv_proj");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->fused, (std::vector<std::string>{"query", "key", "value"}));
  const ModuleTemplate* gate_up = module("phi3", "layers.{N}.mlp.gate_up_proj");
  ASSERT_NE(gate_up, nullptr);
  EXPECT_EQ(gate_up->fused, (std::vector<std::string>{"gate", "up"}));
  // transformers 5 calls GPT-NeoX's head lm_head; embed_out (older checkpoints) shares its role and GGUF name.
  auto neox = tables.Find("gpt_neox");
  ASSERT_NE(neox, nullptr);
  auto by_gguf = tables.FromGguf(*neox, "output", "");
  ASSERT_TRUE(by_gguf);
  EXPECT_EQ(by_gguf->hf, "lm_head");
  auto old = tables.MatchHf(*neox, "embed_out");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->canonical, "head/lm");
}

// The consistency rules name the first offending pair in the order (later module, earlier module, rule),
// also when a template breaks rules with several earlier ones.
TEST(NamingTables, ReportsTheFirstInconsistentPair) {
  const std::string k =
      R"({"hf": "layers.{N}.k", "canonical": "layers/{N}/k", "gguf": "blk.{N}.attn_k", "kind": "linear"})";
  // modules[2] repeats modules[1]'s hf and modules[0]'s gguf: the earlier module, modules[0], is named.
  EXPECT_EQ(ParseError(Table(kGood + "," + k + R"(, {"hf": "layers.{N}.k", "canonical": "layers/{N}/other",
                                                    "gguf": "blk.{N}.attn_q", "kind": "linear"})")),
            "arch/bad.json: modules[2].gguf: \"blk.{N}.attn_q\" repeats modules[0] under another canonical name");
  // Against one earlier module, the hf rule comes before the canonical rule.
  EXPECT_EQ(ParseError(Table(kGood + "," + k + R"(, {"hf": "layers.{N}.k", "canonical": "layers/{N}/k",
                                                    "kind": "conv1d"})")),
            "arch/bad.json: modules[2].hf: \"layers.{N}.k\" repeats modules[1]");
  // The same hf as a head template and as a body template is no repeat.
  EXPECT_EQ(ParseError(Table(R"({"hf": "lm_head", "canonical": "lm_head", "kind": "linear", "head": true},
                                {"hf": "lm_head", "canonical": "body_lm_head", "kind": "linear"})")),
            "ok");
  // Variants of one role (T5's wi / wi_1) share canonical, gguf and kind; a third with another kind breaks
  // the rule with the first of them.
  const std::string wi =
      R"({"hf": "layers.{N}.wi", "canonical": "layers/{N}/wi", "gguf": "blk.{N}.ffn_up", "kind": "linear"})";
  const std::string wi_1 =
      R"({"hf": "layers.{N}.wi_1", "canonical": "layers/{N}/wi", "gguf": "blk.{N}.ffn_up", "kind": "linear"})";
  EXPECT_EQ(ParseError(Table(wi + "," + wi_1)), "ok");
  EXPECT_EQ(ParseError(Table(wi + "," + wi_1 + R"(, {"hf": "layers.{N}.wi_2", "canonical": "layers/{N}/wi",
                                                    "gguf": "blk.{N}.ffn_up", "kind": "conv1d"})")),
            "arch/bad.json: modules[2].canonical: \"layers/{N}/wi\" repeats modules[0] with another gguf name, kind or "
            "head flag");
}

// A user table may list tens of thousands of modules: the consistency check must not compare every pair
// (it took 12 s for 20,000 modules under ASan when it did).
TEST(NamingTables, LargeTableLoadsInLinearTime) {
  constexpr int kModules = static_cast<int>(kMaxTemplates) - 1;  // the repeat below makes it the largest allowed
  std::string modules;
  for (int i = 0; i < kModules; ++i) {
    if (i > 0) modules += ",";
    const std::string n = std::to_string(i);
    modules += R"({"hf": "layers.{N}.m)" + n + R"(", "canonical": "layers/{N}/m)" + n + R"(", "gguf": "blk.{N}.m)" + n +
               R"(", "kind": "linear"})";
  }
  const std::string text = Table(modules);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ParseError(text), "ok");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  // A repeat at the very end is still found and named.
  const std::string repeated = Table(modules + R"(, {"hf": "layers.{N}.m7", "canonical": "c/{N}", "kind": "linear"})");
  EXPECT_EQ(ParseError(repeated), "arch/bad.json: modules[999].hf: \"layers.{N}.m7\" repeats modules[7]");
}

TEST(NamingTables, AddReplacesByNameAndKeepsOrder) {
  NamingTables tables = B();
  size_t n = tables.arches().size();
  std::string custom = Table(kGood, R"(, "gguf_arch": "mine")");
  EmbeddedFile add[] = {{"user/gpt2.json", custom}, {"user/mine.json", custom}};
  ASSERT_TRUE(tables.Add(add).ok());
  ASSERT_EQ(tables.arches().size(), n + 1);
  EXPECT_EQ(tables.Find("gpt2")->gguf_arch, "mine");  // replaced in place
  EXPECT_EQ(tables.arches().back().name, "mine");
  EXPECT_EQ(tables.MatchHf(*tables.Find("mine"), "model.layers.4.q")->gguf, "blk.4.attn_q");
  // A bad file adds nothing.
  EmbeddedFile bad[] = {{"user/ok.json", custom}, {"user/bad.json", "{"}};
  Status s = tables.Add(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message.rfind("user/bad.json: not valid JSON at byte ", 0), 0u) << s.error().message;
  EXPECT_EQ(tables.arches().size(), n + 1);
  // Two files with one name in one call.
  EmbeddedFile twice[] = {{"a/x.json", custom}, {"b/x.json", custom}};
  auto p = NamingTables::Parse(twice);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, "b/x.json: a table named \"x\" is already listed");
}

}  // namespace
}  // namespace pb::adapter

namespace pb::testing {
namespace {

// Tables supplied at run time (--naming-table / namingTables): added after the embedded ones, a table of the
// same name replacing the embedded one, a malformed one an InvalidConfig naming its file.
TEST(UserNamingTables, AddReplaceAndRefuse) {
  EXPECT_EQ(app::TablesWithUserFiles({}).value(), nullptr);
  const std::string toy =
      R"({"model_types": ["toymodel"], "architectures": [], "body_prefixes": ["model."], "modules": [
      {"hf": "blocks.{N}.attn.wq", "canonical": "layers/{N}/attention/query", "kind": "linear"}]})";
  const adapter::EmbeddedFile added[] = {{"toymodel.json", toy}};
  auto tables = app::TablesWithUserFiles(added);
  ASSERT_TRUE(tables.ok()) << tables.error().message;
  ASSERT_NE(tables.value(), nullptr);
  EXPECT_EQ(tables.value()->arches().size(), adapter::NamingTables::Builtin().arches().size() + 1);
  ASSERT_NE(tables.value()->Find("toymodel"), nullptr);
  EXPECT_EQ(adapter::NamingTables::Builtin().Find("toymodel"), nullptr);  // the embedded tables are untouched
  const adapter::ArchTable* embedded_llama = adapter::NamingTables::Builtin().Find("llama");
  ASSERT_NE(embedded_llama, nullptr);
  const std::string llama = R"({"model_types": ["llama"], "architectures": [], "body_prefixes": ["model."], "modules": [
      {"hf": "blocks.{N}.attn.wq", "canonical": "layers/{N}/attention/query", "kind": "linear"}]})";
  const adapter::EmbeddedFile replaced[] = {{"llama.json", llama}};
  auto replacing = app::TablesWithUserFiles(replaced);
  ASSERT_TRUE(replacing.ok()) << replacing.error().message;
  EXPECT_EQ(replacing.value()->arches().size(), adapter::NamingTables::Builtin().arches().size());
  ASSERT_NE(replacing.value()->Find("llama"), nullptr);
  EXPECT_EQ(replacing.value()->Find("llama")->modules.size(), 1u);
  const adapter::EmbeddedFile bad[] = {{"/tmp/bad-table.json", R"({"model_types": ["x"], "modules": 3})"}};
  auto refused = app::TablesWithUserFiles(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::InvalidConfig);
  EXPECT_NE(refused.error().message.find("/tmp/bad-table.json"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace pb::testing
