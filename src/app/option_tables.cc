#include "app/option_tables.h"

#include <algorithm>
#include <array>

#include "core/utf8.h"

namespace pb::app {
namespace {

using K = OptionKind;

constexpr std::string_view kFormats = "peft|mlx|kohya|gguf-names|diffusers-attnproc|gguf";
constexpr std::string_view kTargets = "peft|mlx|kohya|gguf-names|gguf";
constexpr std::string_view kCombineMethods =
    "cat|linear|svd|ties|ties_svd|dare_linear|dare_ties|dare_linear_svd|dare_ties_svd|magnitude_prune|"
    "magnitude_prune_svd";
// The push block's help texts start here in every command's help, whatever the command's own column.
constexpr size_t kPushHelpColumn = 22;

// Rows several commands share, written once.
const OptionRow kOut{.name = "out", .alias = 'o', .kind = K::kPath};
const OptionRow kBaseConfig{.name = "base-config",
                            .js = "baseConfig",
                            .kind = K::kPath,
                            .metavar = "FILE",
                            .help = "the base config.json, when it is not beside the weights"};
const OptionRow kFollowLinks{.name = "follow-links",
                             .help = "read shards and configs that are links leading outside their directory"};
// create and extract write an adapter from a base model's weights: the same output and base-model rows.
const OptionRow kAdapterJson{.name = "json", .help = "print a JSON summary"};
const OptionRow kAdapterForce{.name = "force", .help = "write into a non-empty DIR (replacing the adapter files)"};
const OptionRow kBaseArch{.name = "arch",
                          .js = "arch",
                          .kind = K::kText,
                          .metavar = "NAME",
                          .help = "naming table to use (default: from config.json, else detected)"};
const OptionRow kBaseNamingTable{.name = "naming-table",
                                 .js = "namingTables",
                                 .kind = K::kRepeated,
                                 .metavar = "FILE",
                                 .help = "a naming table to add (repeatable)"};
const OptionRow kBaseName{.name = "", .js = "baseName", .kind = K::kApi};  // the name a config records, for bytes
const OptionRow kRevision{.name = "", .js = "revision", .kind = K::kApi};
const OptionRow kSignal{.name = "", .js = "signal", .kind = K::kApi};
const OptionRow kOnProgress{.name = "", .js = "onProgress", .kind = K::kApi};

// Rows in order: `head`, then `tail`.
std::vector<OptionRow> Concat(std::vector<OptionRow> head, const std::vector<OptionRow>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// The rows create and extract share after their own: what they write, and how they read the base model.
std::vector<OptionRow> AdapterFromBaseRows() {
  return {kAdapterJson, kAdapterForce, kBaseConfig, kBaseArch, kBaseNamingTable,
          kFollowLinks, kBaseName,     kRevision,   kSignal,   kOnProgress};
}

// --push-to and its companions (app/push_target.h), in the help's order; `push` takes --to instead of --push-to.
std::vector<OptionRow> PushRows(bool push_command) {
  std::vector<OptionRow> rows;
  if (push_command)
    rows.push_back({.name = "to",
                    .kind = K::kText,
                    .metavar = "OWNER/REPO[@BRANCH]",
                    .help = "the repo, and the branch (default main)"});
  else
    rows.push_back({.name = "push-to",
                    .kind = K::kText,
                    .metavar = "OWNER/REPO[@BRANCH]",
                    .help =
                        "then push the files written to that Hub model repo, in one commit\n"
                        "(HF_TOKEN or huggingface_hub's token file, HF_ENDPOINT; a missing repo or BRANCH is\n"
                        "created, as `hf upload` does; if the push fails, `peft-bridge push OUT --to ...` retries)"});
  rows.push_back({.name = "create-pr", .help = "push as a pull request (refs/pr/N) against BRANCH (default main)"});
  rows.push_back({.name = "commit-message",
                  .kind = K::kText,
                  .metavar = "M",
                  .help = "the commit's title (default: peft-bridge COMMAND: N file(s))"});
  rows.push_back(
      {.name = "private", .help = "a repo the push creates is private (an existing repo keeps its visibility)"});
  rows.push_back({.name = "create-repo",
                  .help = "accepted for scripts written before the repo was created by default; no change"});
  return rows;
}

std::vector<OptionRow> MergeRows(bool quantize) {
  std::vector<OptionRow> rows = {
      {.name = "base", .js = "base", .kind = K::kPath},
      {.name = "adapter", .js = "adapter", .kind = K::kPath},
      kOut,
      {.name = "dtype",
       .js = "dtype",
       .kind = K::kDtype,
       .metavar = "D",
       .help = "output dtype of floating-point tensors (default: each tensor's own)"},
      {.name = "safe", .js = "safe", .help = "fail on NaN or Inf in a merged tensor, naming the module"},
  };
  if (quantize)
    rows.insert(rows.end(),
                {
                    {.name = "quantize",
                     .js = "quantize",
                     .kind = K::kChoice,
                     .choices = "fp8|int8|int4",
                     .metavar = "Q",
                     .help = "write the Linear weights quantized, rounded once from the merge in the model\n"
                             "dtype, in the layout vLLM and transformers load (docs/merge.md, Quantize):\n"
                             "fp8: compressed-tensors float-quantized, per-channel scales, dynamic FP8\n"
                             "activations; int8/int4: compressed-tensors pack-quantized, weight-only"},
                    {.name = "scheme",
                     .js = "scheme",
                     .kind = K::kChoice,
                     .choices = "per-channel|per-group|block",
                     .metavar = "S",
                     .help = "per-channel (fp8's default), per-group (int's default) or block (fp8 only:\n"
                             "transformers' fine-grained FP8, 128 x 128 blocks)"},
                    {.name = "group-size",
                     .js = "groupSize",
                     .kind = K::kInteger,
                     .default_value = "128",
                     .metavar = "N",
                     .help = "columns per scale with per-group (default 128)"},
                });
  rows.insert(rows.end(), {
                              {.name = "dry-run", .help = "plan and report, write nothing"},
                              {.name = "json",
                               .help = "print a JSON summary (modules, tensors, unmatched keys, bytes, time, memory)"},
                              kBaseConfig,
                              {.name = "arch",
                               .js = "arch",
                               .kind = K::kText,
                               .metavar = "NAME",
                               .help = "naming table to use (default: from config.json or the adapter's keys)"},
                              {.name = "naming-table",
                               .js = "namingTables",
                               .kind = K::kRepeated,
                               .metavar = "FILE",
                               .help = "a naming table to add (repeatable), as for adapter-info"},
                              {.name = "force",
                               .help = "write into a non-empty OUT: replace the files written, remove stale model\n"
                                       "files (old shards, old index, adapter files), keep everything else"},
                              {.name = "allow-partial",
                               .js = "allowPartial",
                               .help = "merge even if adapter tensors cannot be applied (a warning per tensor)"},
                              kFollowLinks,
                              {.name = "no-copy-extra",
                               .js = "copyExtra",
                               .kind = K::kNegatedFlag,
                               .help = "copy none of the base's other files (tokenizer, generation config...)"},
                              {.name = "threads",
                               .kind = K::kInteger,
                               .metavar = "N",
                               .help = "merge with N threads, each a region of the shard; the output bytes do not\n"
                                       "depend on N (default: the cores this process may use when the low-rank\n"
                                       "products are at least half the work, else one per shard up to them).\n"
                                       "The npm CLI merges whole shards at once on worker threads, by default\n"
                                       "only when the products dominate or it quantizes; a one-file model, a\n"
                                       "remote base or a remote adapter on one thread"},
                              {.name = "", .js = "unmerge", .kind = K::kApi},  // the CLI's `unmerge` command
                              kSignal,
                              kOnProgress,
                          });
  return rows;
}

std::vector<OptionTable> MakeTables() {
  const OptionRow adapter_info_json{.name = "json",
                                    .help = "print one JSON object; on invalid input {\"ok\":false,\"error\":{...}}"};
  std::vector<OptionTable> tables;
  tables.push_back({"inspect", 12, {adapter_info_json}, {}});
  tables.push_back({"convert",
                    21,
                    {
                        {.name = "dtype",
                         .js = "dtype",
                         .kind = K::kDtype,
                         .metavar = "D",
                         .help = "target dtype: bf16, f16 or f32"},
                        {.name = "order",
                         .js = "order",
                         .kind = K::kChoice,
                         .choices = "reference|input",
                         .default_value = "reference",
                         .metavar = "reference",
                         .help = "tensor order of Python safetensors: dtype descending, then name (default)"},
                        {.name = "", .kind = K::kHelpNote, .metavar = "--order input", .help = "keep IN's order"},
                        {.name = "json", .help = "print a JSON summary (or a JSON error)"},
                        {.name = "force"},
                        {.name = "quantize",
                         .kind = K::kChoice,
                         .choices = "fp8|int8|int4",
                         .metavar = "Q",
                         .help = "quantize MODEL (a .safetensors file with its config.json, or a folder, as merge's\n"
                                 "--base) into the folder OUT_DIR, as merge --quantize does with no adapter;\n"
                                 "--scheme, --group-size: as for merge (docs/merge.md, Quantize)"},
                        {.name = "scheme", .kind = K::kChoice, .choices = "per-channel|per-group|block"},
                        {.name = "group-size", .kind = K::kInteger, .default_value = "128"},
                        {.name = "dry-run"},
                        {.name = "base-config", .kind = K::kPath},
                        kSignal,
                        kOnProgress,
                    },
                    {}});
  tables.push_back(
      {"adapter-info",
       22,
       {
           adapter_info_json,
           {.name = "from",
            .js = "from",
            .kind = K::kChoice,
            .choices = kFormats,
            .metavar = "FORMAT",
            .help = "peft, mlx, kohya, gguf-names, diffusers-attnproc or gguf instead of detecting it"},
           {.name = "arch",
            .js = "arch",
            .kind = K::kText,
            .metavar = "NAME",
            .help = "naming table to use (llama, gpt2, ...); default: from --base-config or the keys"},
           {.name = "naming-table",
            .js = "namingTables",
            .kind = K::kRepeated,
            .metavar = "FILE",
            .help = "a naming table to add (repeatable; docs/naming-tables.md): a new model family,\n"
                    "or a replacement for the built-in table of the same name"},
           {.name = "base-config",
            .js = "baseConfig",
            .kind = K::kPath,
            .metavar = "FILE",
            .help = "the base model's config.json (architecture, head counts, layer count)"},
           {.name = "strict", .js = "strict", .help = "fail with UnresolvedTensor if any tensor is not understood"},
           {.name = "follow-links"},
           kSignal,
       },
       {}});
  tables.push_back(
      {"translate",
       22,
       {
           {.name = "to",
            .js = "to",
            .kind = K::kChoice,
            .choices = kTargets,
            .metavar = "FORMAT",
            .help = "peft (adapter_model.safetensors + adapter_config.json), mlx (adapters.safetensors\n"
                    "+ adapter_config.json), kohya, gguf-names (llama.cpp's names and layout in safetensors)\n"
                    "or gguf (llama.cpp's LoRA file for --lora: OUT.gguf, or OUT_DIR/adapter_model.gguf)"},
           {.name = "outtype",
            .js = "outtype",
            .kind = K::kChoice,
            .choices = "f32|f16|bf16|q8_0",
            .default_value = "f32",
            .metavar = "TYPE",
            .help = "gguf only: the LoRA tensors' type, as convert_lora_to_gguf.py's --outtype (f32, the\n"
                    "default, f16, bf16, q8_0; q8_0 rows not a multiple of 32 long are written F16)"},
           {.name = "dry-run", .js = "dryRun", .help = "print the plan, write nothing"},
           {.name = "strict", .js = "strict", .help = "fail with UnresolvedTensor if any tensor cannot be mapped"},
           {.name = "old-peft",
            .js = "oldPeft",
            .help = "write a config PEFT < 0.14 accepts (fails if a newer field matters)"},
           {.name = "force",
            .help = "write into a non-empty OUT_DIR: replace the files written, remove stale\n"
                    "model files (*.safetensors, model.safetensors.index.json, adapter_config.json),\n"
                    "keep everything else"},
           {.name = "allow-partial",
            .js = "allowPartial",
            .help = "write even if tensors are dropped (a warning line per tensor on stderr)"},
           {.name = "follow-links", .help = "read files in IN_DIR that are links leading outside it"},
           {.name = "base-config",
            .js = "baseConfig",
            .kind = K::kPath,
            .metavar = "FILE",
            .help = "gguf and gguf-names: the base's config.json (architecture, head counts), or\n"
                    "hf://OWNER/REPO[@REV] for its config.json on the Hub. Without it, as\n"
                    "convert_lora_to_gguf.py: the adapter's base_model_name_or_path when it is a local\n"
                    "folder with config.json, or its Hub repo when IN_DIR is on the Hub (said in the notes)"},
           // The separating space is the text's: these lines keep their three spaces.
           {.name = "",
            .kind = K::kHelpNote,
            .metavar = "--from, --arch, --naming-table, --json",
            .help = " as for adapter-info"},
           {.name = "from", .js = "from", .kind = K::kChoice, .choices = kFormats},
           {.name = "arch", .js = "arch", .kind = K::kText},
           {.name = "naming-table", .js = "namingTables", .kind = K::kRepeated},
           {.name = "json"},
           kSignal,
       },
       PushRows(false)});
  tables.push_back({"combine",
                    22,
                    {
                        {.name = "weights",
                         .js = "weights",
                         .kind = K::kList,
                         .metavar = "W1,W2,...",
                         .help = "one per adapter (default 1 each); negative weights subtract"},
                        {.name = "method",
                         .js = "method",
                         .kind = K::kChoice,
                         .choices = kCombineMethods,
                         .default_value = "cat",
                         .metavar = "M",
                         .help = "cat (default); linear: exact as cat, or with --peft-compat PEFT's A-and-B-separate\n"
                                 "sum (cross terms); svd: the exact sum recompressed to --rank by its SVD; ties,\n"
                                 "dare_linear, dare_ties, magnitude_prune: PEFT's, on A and B separately (equal\n"
                                 "ranks); *_svd: those on the full deltas, then recompressed"},
                        {.name = "rank",
                         .js = "rank",
                         .kind = K::kInteger,
                         .metavar = "N",
                         .help = "the svd methods' rank (default: the largest input rank)"},
                        {.name = "density",
                         .js = "density",
                         .kind = K::kNumber,
                         .metavar = "D",
                         .help = "the fraction the pruning methods keep, in [0, 1]"},
                        {.name = "majority-sign",
                         .js = "majoritySign",
                         .kind = K::kChoice,
                         .choices = "total|frequency",
                         .default_value = "total",
                         .metavar = "S",
                         .help = "ties: total (default) or frequency"},
                        {.name = "svd-clamp",
                         .js = "svdClamp",
                         .kind = K::kNumber,
                         .metavar = "Q",
                         .help = "clamp the new factors to the Q-quantile of their values, as PEFT does"},
                        {.name = "seed",
                         .js = "seed",
                         .kind = K::kInteger,
                         .default_value = "0",
                         .metavar = "S",
                         .help = "DARE's random masks (default 0): the same bytes on every run and platform"},
                        {.name = "peft-compat",
                         .js = "peftCompat",
                         .help = "PEFT's numbers and config, its rounding and bugs included: linear's cross terms,\n"
                                 "the first adapter's use_rslora kept (an overscale), its target_modules rule"},
                        kOut,
                        {.name = "dtype",
                         .js = "dtype",
                         .kind = K::kDtype,
                         .metavar = "D",
                         .help = "the new factors' dtype (default: the first adapter's)"},
                        {.name = "dry-run", .js = "dryRun", .help = "print the plan, write nothing"},
                        {.name = "force", .help = "write into a non-empty DIR, as translate does"},
                        {.name = "allow-partial",
                         .js = "allowPartial",
                         .help = "combine even if an adapter has tensors no output holds (noted per tensor); without\n"
                                 "it they are refused, as translate and merge refuse them"},
                        {.name = "",
                         .kind = K::kHelpNote,
                         .metavar = "--from, --arch, --naming-table, --base-config, --strict, --follow-links, --json",
                         .help = " as for adapter-info"},
                        {.name = "from", .js = "from", .kind = K::kChoice, .choices = kFormats},
                        {.name = "arch", .js = "arch", .kind = K::kText},
                        {.name = "naming-table", .js = "namingTables", .kind = K::kRepeated},
                        {.name = "base-config", .js = "baseConfig", .kind = K::kPath},
                        {.name = "strict", .js = "strict"},
                        {.name = "follow-links"},
                        {.name = "json"},
                        kSignal,
                    },
                    PushRows(false)});
  tables.push_back({"merge", 21, MergeRows(true), PushRows(false)});
  tables.push_back({"unmerge", 21, MergeRows(false), {}, false});
  tables.push_back(
      {"create", 22,
       Concat(
           {
               {.name = "base", .js = "base", .kind = K::kPath},
               kOut,
               {.name = "target-modules",
                .js = "targetModules",
                .kind = K::kList,
                .metavar = "L",
                .help = "comma-separated module names, PEFT's list rule (a module whose path is a name or\n"
                        "ends with `.name`), or all-linear (every Linear/Conv1D but the output head);\n"
                        "each name must match a module"},
               {.name = "target-regex",
                .js = "targetRegex",
                .kind = K::kText,
                .metavar = "RE",
                .help = "instead: a Python regex the whole module path must match (PEFT's string form)"},
               {.name = "r",
                .js = "r",
                .kind = K::kInteger,
                .default_value = "8",
                .metavar = "R",
                .help = "rank (default 8)"},
               {.name = "alpha",
                .js = "alpha",
                .kind = K::kNumber,
                .default_value = "8",
                .metavar = "A",
                .help = "lora_alpha (default 8, PEFT's); an integer stays an int in the config"},
               {.name = "rslora", .js = "rslora", .help = "scaling alpha/sqrt(r) (use_rslora)"},
               {.name = "dora",
                .js = "dora",
                .help = "DoRA (use_dora): reads the targeted base weights for the magnitudes"},
               {.name = "init",
                .js = "init",
                .kind = K::kChoice,
                .choices = "kaiming|gaussian",
                .default_value = "kaiming",
                .metavar = "I",
                .help = "kaiming (PEFT's default, init_lora_weights=true) or gaussian"},
               {.name = "seed",
                .js = "seed",
                .kind = K::kInteger,
                .default_value = "0",
                .metavar = "S",
                .help = "the random numbers' seed, 0 to 2^64-1 (default 0)"},
               {.name = "dtype",
                .js = "dtype",
                .kind = K::kDtype,
                .default_value = "f32",
                .metavar = "D",
                .help = "the adapter's dtype (default f32, as PEFT's fresh adapter)"},
               {.name = "dry-run", .js = "dryRun", .help = "plan and report, write nothing"},
           },
           AdapterFromBaseRows()),
       PushRows(false)});
  tables.push_back(
      {"extract", 22,
       Concat(
           {
               {.name = "base",
                .js = "base",
                .kind = K::kPath,
                .metavar = "PATH",
                .help = "the base model: folder, model.safetensors, its index, or a remote repo (as merge)"},
               {.name = "tuned",
                .js = "tuned",
                .kind = K::kPath,
                .metavar = "PATH",
                .help = "the fine-tuned model, the same forms (the same tensor names and shapes)"},
               kOut,
               {.name = "rank",
                .js = "rank",
                .kind = K::kInteger,
                .metavar = "N",
                .help = "every module at rank N (or its smaller side)"},
               {.name = "energy",
                .js = "energy",
                .kind = K::kNumber,
                .metavar = "F",
                .help = "per module the smallest rank keeping the fraction F of ||dW||^2, at most --max-rank"},
               {.name = "max-rank",
                .js = "maxRank",
                .kind = K::kInteger,
                .default_value = "128",
                .metavar = "N",
                .help = "the rank when neither is given, and --energy's cap (default 128, mergekit's)"},
               {.name = "modules",
                .js = "modules",
                .kind = K::kList,
                .default_value = "all-linear",
                .metavar = "L",
                .help = "the layers to decompose: all-linear (default: every Linear/Conv1D but the head) or\n"
                        "comma-separated names, PEFT's list rule (a convolution may be named too)"},
               {.name = "embeddings",
                .js = "embeddings",
                .kind = K::kChoice,
                .choices = "save|lora|skip",
                .default_value = "save",
                .metavar = "E",
                .help = "embeddings and the head: save (default, modules_to_save when changed), lora\n"
                        "(decomposed: lora_embedding_A/B, the head as a Linear) or skip (not read)"},
               {.name = "dtype",
                .js = "dtype",
                .kind = K::kDtype,
                .metavar = "D",
                .help = "the adapter's dtype (default: the tuned weights')"},
               {.name = "dry-run", .js = "dryRun", .help = "plan and report, read no weights, write nothing"},
           },
           AdapterFromBaseRows()),
       PushRows(false)});
  tables.push_back({"push", kPushHelpColumn, {}, PushRows(true)});
  return tables;
}

const std::vector<OptionTable>& Tables() {
  static const std::vector<OptionTable> tables = MakeTables();
  return tables;
}

// "  HEAD" padded to `column` (at least one space; two after a head longer than the column), then the text, its
// further lines indented to the column.
void AppendHelp(std::string& out, std::string_view head, std::string_view text, size_t column) {
  std::string line = "  " + std::string(head);
  line += line.size() < column ? std::string(column - line.size(), ' ') : line.size() == column ? " " : "  ";
  size_t start = 0;
  while (true) {
    const size_t end = text.find('\n', start);
    out += (start == 0 ? line : std::string(column, ' '));
    out += text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
}

void AppendRows(std::string& out, const std::vector<OptionRow>& rows, size_t column) {
  for (const auto& row : rows) {
    if (row.help.empty()) continue;
    std::string head = row.kind == K::kHelpNote ? std::string(row.metavar) : "--" + std::string(row.name);
    if (row.kind != K::kHelpNote && !row.metavar.empty()) head += " " + std::string(row.metavar);
    AppendHelp(out, head, row.help, column);
  }
}

Json RowJson(const OptionRow& row) {
  return {{"name", row.name},       {"alias", row.alias ? std::string(1, row.alias) : std::string()},
          {"js", row.js},           {"kind", OptionKindName(row.kind)},
          {"choices", row.choices}, {"default", row.default_value},
          {"help", row.help}};
}

}  // namespace

std::span<const OptionTable> OptionTables() { return Tables(); }

const OptionTable* FindOptionTable(std::string_view command) {
  for (const auto& table : Tables())
    if (table.command == command) return &table;
  return nullptr;
}

std::span<const OptionRow> CommonOptions() {
  static const std::array<OptionRow, 3> rows = {{
      {.name = "help", .alias = 'h', .help = "show this help"},
      {.name = "quiet", .alias = 'q'},
      {.name = "no-progress"},
  }};
  return rows;
}

std::string_view OptionKindName(OptionKind kind) {
  switch (kind) {
    case K::kFlag: return "flag";
    case K::kNegatedFlag: return "negated-flag";
    case K::kText: return "text";
    case K::kPath: return "path";
    case K::kNumber: return "number";
    case K::kInteger: return "integer";
    case K::kChoice: return "choice";
    case K::kDtype: return "dtype";
    case K::kList: return "list";
    case K::kRepeated: return "repeated";
    case K::kApi: return "api";
    case K::kHelpNote: return "help-note";
  }
  return "";
}

std::string OptionHelpLines(std::string_view command) {
  const OptionTable* table = FindOptionTable(command);
  if (!table) return {};
  std::string out;
  AppendRows(out, table->rows, table->help_column);
  AppendRows(out, table->push_rows, kPushHelpColumn);
  AppendHelp(out, "--help", CommonOptions()[0].help, table->help_column);
  return out;
}

Json OptionTablesJson() {
  Json out = Json::object();
  for (const auto& table : Tables()) {
    Json rows = Json::array();
    for (const auto* list : {&table.rows, &table.push_rows})
      for (const auto& row : *list)
        if (row.kind != K::kHelpNote) rows.push_back(RowJson(row));
    out[std::string(table.command)] = std::move(rows);
  }
  Json common = Json::array();
  for (const auto& row : CommonOptions()) common.push_back(RowJson(row));
  out["*"] = std::move(common);
  return out;
}

Result<CommandLine> OptionsCommandLine(std::string_view command, const Json& options) {
  const OptionTable* table = FindOptionTable(command);
  if (!table) return MakeError(ErrorCode::InvalidArgument, "no options table for `" + std::string(command) + "`");
  if (!options.is_object())
    return MakeError(ErrorCode::InvalidArgument, std::string(command) + " options are not a JSON object");
  auto wrong = [&](const OptionRow& row, std::string_view want) {
    return MakeError(ErrorCode::InvalidArgument,
                     std::string(command) + " option `" + std::string(row.js) + "` must be " + std::string(want));
  };
  // A value as the CLI's text: a string as it is, a number (or anything else scalar) as its JSON text.
  auto text = [](const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  std::vector<std::string> args;
  for (const auto* list : {&table->rows, &table->push_rows})
    for (const auto& row : *list) {
      if (row.name.empty() || row.js.empty() || !options.contains(std::string(row.js))) continue;
      const Json& v = options[std::string(row.js)];
      if (v.is_null()) continue;
      const std::string option = "--" + std::string(row.name);
      switch (row.kind) {
        case K::kFlag:
        case K::kNegatedFlag:
          if (!v.is_boolean()) return wrong(row, "a boolean");
          if (v.get<bool>() == (row.kind == K::kFlag)) args.push_back(option);
          break;
        case K::kRepeated:  // the caller reads these (naming tables are objects in JS, files in the CLI)
        case K::kPath:      // an input: a path, bytes or an object, read by the caller
          break;
        case K::kList:
          if (v.is_array() && v.empty()) break;  // no names, no weights: as if not given
          if (v.is_array()) {
            std::string joined;
            for (const auto& item : v) {
              if (!item.is_string() && !item.is_number()) return wrong(row, "an array of strings or numbers");
              joined += (joined.empty() ? "" : ",") + text(item);
            }
            args.insert(args.end(), {option, joined});
          } else if (v.is_string() || v.is_number()) {
            args.insert(args.end(), {option, text(v)});
          } else {
            return wrong(row, "an array or a string");
          }
          break;
        default:
          if (v.is_object() || v.is_array()) return wrong(row, "a string or a number");
          args.insert(args.end(), {option, text(v)});
      }
    }
  auto parsed = ParseCommandOptions(command, args);
  if (auto* error = std::get_if<UsageError>(&parsed)) return MakeError(ErrorCode::InvalidArgument, error->message);
  return std::get<CommandLine>(std::move(parsed));
}

}  // namespace pb::app
