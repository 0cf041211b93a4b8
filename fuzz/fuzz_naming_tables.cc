// libFuzzer target for user-supplied naming tables: architecture tables (NamingTables::Parse / Add, the
// loader behind --naming-table) and format tables (ParseFormatTable), then the lookups on what they accept.
//
// Input: up to 8 parts, each a table's JSON text, tried as an architecture table "arch/user<i>.json" and as a
// format table "formats/user<i>.json"; the parts also serve as base config.json texts (HeadCountsFromConfig,
// FromModelConfig). Compact encoding expanded first.
//
// Checks on an accepted architecture table, added over the built-in tables (abort() on failure):
//   - every template, filled with layer 3 under every body prefix, is found again by MatchHf with that path;
//   - that match's canonical name maps back (FromCanonical) and its GGUF name too (FromGguf), to the same names;
//   - Detect over all the filled paths finds a table;
//   - every gguf_permute gives, through GgufRowOrder, a permutation of the rows whenever it succeeds.
// On an accepted format table: every role's suffix after the first prefix splits back (SplitFormatKey) to
// that prefix and a role with the same suffix.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "adapter/format_table.h"
#include "adapter/naming_tables.h"
#include "fuzz_input.h"
#include "json_mutator.h"

namespace {

using namespace pb::adapter;

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_naming_tables: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

std::string Filled(const std::string& tmpl, uint64_t layer) {
  std::string out = tmpl;
  size_t at = out.find("{N}");
  if (at != std::string::npos) out.replace(at, 3, std::to_string(layer));
  return out;
}

void CheckRowOrder(const RowPermutation& p) {
  for (uint64_t heads : {1u, 2u, 4u})
    for (uint64_t kv : {0u, 1u, 2u})
      for (uint64_t rows : {0u, 4u, 8u, 12u, 24u}) {
        auto order = GgufRowOrder(p, rows, heads, kv);
        if (!order.ok()) continue;
        std::vector<uint64_t> sorted = order.value();
        std::sort(sorted.begin(), sorted.end());
        for (uint64_t i = 0; i < sorted.size(); ++i)
          if (sorted[i] != i)
            Fail("GgufRowOrder is not a permutation",
                 std::string(pb::adapter::RowPermutationKindName(p.kind)) + " rows=" + std::to_string(rows));
      }
}

void CheckArch(const NamingTables& tables, const ArchTable& arch) {
  std::vector<std::string> paths;
  // The first 64 templates: every lookup is linear in the templates, so checking all of a 20,000-module
  // table would be quadratic in the harness itself.
  for (size_t i = 0; i < arch.modules.size() && i < 64; ++i) {
    const ModuleTemplate& t = arch.modules[i];
    if (t.gguf_permute) CheckRowOrder(*t.gguf_permute);
    std::vector<std::string> prefixes = t.head ? std::vector<std::string>{""} : arch.body_prefixes;
    for (const auto& prefix : prefixes) {
      const std::string hf = prefix + Filled(t.hf, 3);
      paths.push_back(hf);
      auto m = tables.MatchHf(arch, hf);
      if (!m || m->hf != hf) Fail("a filled template is not matched by MatchHf", hf);
      // Head templates match with prefix ""; the reverse lookups take a body prefix of the table.
      const std::string& body = m->tmpl->head ? arch.body_prefixes.front() : m->prefix;
      auto back = tables.FromCanonical(arch, m->canonical, body);
      if (!back || back->canonical != m->canonical)
        Fail("FromCanonical does not map the canonical name back", m->canonical);
      if (m->gguf) {
        auto g = tables.FromGguf(arch, *m->gguf, body);
        if (!g || g->gguf != m->gguf) Fail("FromGguf does not map the GGUF name back", *m->gguf);
      }
      std::string underscored = hf;
      std::replace(underscored.begin(), underscored.end(), '.', '_');
      (void)tables.FromUnderscored(arch, underscored);
    }
  }
  if (!paths.empty() && tables.Detect(paths) == nullptr) Fail("Detect finds no table for the table's own paths");
}

void CheckFormat(const FormatTable& table) {
  if (table.prefixes.empty()) return;
  for (const auto& r : table.roles) {
    const std::string key = table.prefixes.front() + "model.layers.0.q_proj" + r.suffix;
    auto k = SplitFormatKey(table, key);
    if (!k) Fail("SplitFormatKey does not split a key the table spells", key);
    if (k->spelling->suffix != r.suffix && !r.suffix.ends_with(k->spelling->suffix))
      Fail("SplitFormatKey found an unrelated suffix", key + " -> " + k->spelling->suffix);
    (void)RewritePath(table, k->spelled_path);
  }
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{{"note",
                                                     "model_types",
                                                     "architectures",
                                                     "gguf_arch",
                                                     "body_prefixes",
                                                     "detect_priority",
                                                     "modules",
                                                     "hf",
                                                     "head",
                                                     "canonical",
                                                     "gguf",
                                                     "kind",
                                                     "gguf_permute",
                                                     "tied_to",
                                                     "fused",
                                                     "heads",
                                                     "format",
                                                     "description",
                                                     "weights_file",
                                                     "config_file",
                                                     "prefixes",
                                                     "write_prefix",
                                                     "path_style",
                                                     "metadata",
                                                     "roles",
                                                     "suffix",
                                                     "transpose",
                                                     "path_rewrites",
                                                     "scale",
                                                     "lora_A",
                                                     "lora_B",
                                                     "lora_B_bias",
                                                     "lora_embedding_A",
                                                     "lora_embedding_B",
                                                     "magnitude",
                                                     "alpha",
                                                     "from",
                                                     "to",
                                                     "num_attention_heads",
                                                     "num_key_value_heads",
                                                     "model_type",
                                                     "n_head"},
                                                    {"llama",
                                                     "LlamaForCausalLM",
                                                     "model.",
                                                     "transformer.",
                                                     "",
                                                     "layers.{N}.self_attn.q_proj",
                                                     "layers/{N}/attention/query",
                                                     "blk.{N}.attn_q",
                                                     "linear",
                                                     "conv1d",
                                                     "embedding",
                                                     "conv2d",
                                                     "other",
                                                     "llama_rope",
                                                     "falcon_qkv",
                                                     "gptneox_qkv",
                                                     "num_attention_heads",
                                                     "num_key_value_heads",
                                                     "peft",
                                                     "mlx",
                                                     "kohya",
                                                     "gguf-names",
                                                     "dotted",
                                                     "underscore",
                                                     "gguf",
                                                     ".lora_A.weight",
                                                     ".lora_down.weight",
                                                     "base_model.model.",
                                                     "{N}",
                                                     "lm_head",
                                                     "alpha_tensor"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  auto parts = pb::fuzz::SplitParts(input, 8);
  std::vector<std::string> paths, texts;
  for (size_t i = 0; i < parts.size(); ++i) {
    paths.push_back("arch/user" + std::to_string(i) + ".json");
    texts.emplace_back(parts[i]);
  }
  std::vector<EmbeddedFile> files;
  for (size_t i = 0; i < parts.size(); ++i) files.push_back({paths[i], texts[i]});

  // Alone, and over the built-in tables (a user table may replace a built-in one by name).
  auto alone = NamingTables::Parse(files);
  NamingTables tables = NamingTables::Builtin();
  pb::Status added = tables.Add(files);
  if (alone.ok() != added.ok()) Fail("Parse and Add disagree");
  if (!added.ok() && (added.error().code != pb::ErrorCode::InvalidConfig || added.error().message.empty()))
    Fail("a rejected table is not InvalidConfig with a message", added.error().message);
  if (added.ok()) {
    for (const auto& arch : alone->arches()) {
      const ArchTable* mine = tables.Find(arch.name);
      if (mine == nullptr) Fail("an added table cannot be found by name", arch.name);
      CheckArch(tables, *mine);
    }
  }

  for (size_t i = 0; i < parts.size(); ++i) {
    (void)pb::adapter::HeadCountsFromConfig(texts[i]);
    (void)tables.FromModelConfig(texts[i]);
    auto format = ParseFormatTable("formats/user" + std::to_string(i) + ".json", texts[i]);
    if (format.ok()) CheckFormat(format.value());
    else if (format.error().code != pb::ErrorCode::InvalidConfig)
      Fail("a rejected format table is not InvalidConfig", format.error().message);
  }
  return 0;
}
