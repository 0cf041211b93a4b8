#include "app/cli_text.h"

#include <map>
#include <string>

#include "app/create_report.h"
#include "app/extract_report.h"
#include "app/option_tables.h"

namespace pb {
namespace {

// A help's text up to its "options:" line; the option lines come from the command's table (app/option_tables.h).
std::string_view HelpIntro(std::string_view command) {
  if (command.empty())
    return "usage: peft-bridge <command> [options]\n"
           "\n"
           "Inspect, validate and convert safetensors files and LoRA adapters.\n"
           "\n"
           "commands:\n"
           "  inspect FILE|DIR|URL|hf://REPO[/PATH][@REV] [--json] list tensors, metadata and parameter counts\n"
           "  convert IN OUT --dtype bf16|f16|f32    convert floating-point tensors (a file or a model), streaming\n"
           "  adapter-info DIR [--json]              a LoRA adapter's modules, ranks, scaling and rejects\n"
           "  translate IN_DIR OUT_DIR --to FORMAT   rewrite an adapter as peft, mlx, kohya, gguf-names or gguf\n"
           "  merge --base PATH --adapter DIR -o DIR      merge a LoRA adapter into a model, streaming\n"
           "        [--quantize fp8|int8|int4]               ...written quantized for vLLM / transformers\n"
           "  unmerge --base PATH --adapter DIR -o DIR    subtract a merged adapter again\n"
           "  combine ADAPTER ADAPTER... --weights W,... -o DIR   combine adapters into one (exact by default)\n"
           "  create --base PATH -o DIR --target-modules L  a fresh LoRA adapter, as PEFT initialises it\n"
           "  extract --base PATH --tuned PATH -o DIR   a LoRA adapter from a full fine-tune (truncated SVD)\n"
           "  push DIR --to OWNER/REPO[@BRANCH]     push a folder (or one file) to a Hub model repo, in one commit\n"
           "\n"
           "options:\n"
           "  -h, --help        show help (also after a command: peft-bridge merge --help)\n"
           "  -V, --version     print the version\n"
           "  -q, --quiet       print no summary or progress (errors, warnings and --json output still appear)\n"
           "  --no-progress     no progress bar on the terminal\n"
           "\n"
           "merge, translate, combine, create and extract take --push-to OWNER/REPO[@BRANCH]: the files written are\n"
           "then pushed to that Hub repo in one commit (see `peft-bridge push --help`).\n"
           "\n"
           "A Hub repo is written hf://OWNER/REPO[/PATH][@REVISION] or, as huggingface_hub writes it,\n"
           "hf://OWNER/REPO@REVISION/PATH (a '/' in REVISION as %2F); a bare OWNER/REPO is a local path.\n"
           "\n"
           "merge, unmerge, convert, translate and create --dora draw a progress line on stderr when it is a terminal\n"
           "(bytes done and total, rate, ETA, current file); merge, convert and create print their plan before the "
           "work.\n"
           "PB_PROGRESS=always draws it without a terminal; PB_PROGRESS_CLOCK_MS=N makes every elapsed time read\n"
           "N ms (for tests).\n"
           "\n"
           "Options take their value as `--opt value` or `--opt=value`. Dtypes may be written bf16|bfloat16,\n"
           "f16|fp16|float16|half or f32|fp32|float32|float, in any case.\n"
           "\n"
           "Exit status: 0 success, 1 invalid input or I/O failure, 2 usage error.\n";
  if (command == "inspect")
    return "usage: peft-bridge inspect FILE|DIR|URL|hf://OWNER/REPO[/PATH][@REVISION] [--json]\n"
           "\n"
           "Validates the file as the reference safetensors reader does and lists its tensors (name, dtype,\n"
           "shape, bytes), its metadata and the parameter count per dtype. Remote files (http(s) URLs, or\n"
           "hf:// addresses resolved against $HF_ENDPOINT, default https://huggingface.co, with $HF_TOKEN when\n"
           "set) are read only as far as the header: one or two Range requests. A repo or folder (hf://OWNER/REPO,\n"
           "hf://OWNER/REPO/FOLDER, or hf://OWNER/REPO@REVISION/PATH as huggingface_hub writes it), a local model\n"
           "folder, or a model.safetensors.index.json (local or its URL) means every shard of the model, each report\n"
           "under a \"==> NAME <==\" line, then the totals over all of them.\n"
           "\n"
           "options:\n";
  if (command == "convert")
    return "usage: peft-bridge convert IN OUT --dtype bf16|f16|f32 [--order reference|input] [--json]\n"
           "       peft-bridge convert MODEL_DIR OUT_DIR --dtype bf16|f16|f32 [--dry-run] [--json] [--force]\n"
           "                   [--base-config FILE]\n"
           "       peft-bridge convert MODEL OUT_DIR --quantize fp8|int8|int4 [--scheme S] [--group-size N]\n"
           "                   [--dtype D] [--dry-run] [--json] [--base-config FILE] [--force]\n"
           "\n"
           "Converts every F16, BF16, F32, F64, F8_E4M3 and F8_E5M2 tensor of IN to the given dtype\n"
           "(round to nearest even), copies the others, keeps the metadata, and writes OUT atomically\n"
           "(temporary file, then rename). IN is never modified. A model's folder, its\n"
           "model.safetensors.index.json or a Hub repo (hf://OWNER/REPO) is converted whole, every shard, into the\n"
           "folder OUT_DIR (shards, index, config.json and the model's other files), as merge writes it.\n"
           "\n"
           "options:\n";
  if (command == "adapter-info")
    return "usage: peft-bridge adapter-info DIR [--json] [--from FORMAT] [--arch NAME] [--naming-table FILE]...\n"
           "       [--base-config FILE] [--strict]\n"
           "\n"
           "Reads a LoRA adapter (PEFT, mlx-lm, kohya, llama.cpp names or diffusers' attention-processor files;\n"
           "detected from the files; or a llama.cpp LoRA .gguf file) with PEFT's\n"
           "meaning and lists its modules with rank, alpha and scaling, its other tensors, dtypes, parameter\n"
           "count, unknown config keys, and every tensor that would be rejected, with the reason. DIR may also be\n"
           "the .safetensors or .gguf file itself, a Hub repo or folder (hf://OWNER/REPO[/FOLDER][@REVISION]) or the\n"
           "URL of the weights file (fetched whole, at most $PB_HTTP_MAX_ADAPTER_BYTES).\n"
           "\n"
           "options:\n";
  if (command == "translate")
    return "usage: peft-bridge translate IN_DIR OUT_DIR|OUT.gguf --to peft|mlx|kohya|gguf-names|gguf [--arch NAME]\n"
           "       [--outtype f32|f16|bf16|q8_0] [--base-config FILE] [--from FORMAT] [--dry-run] [--strict] "
           "[--old-peft] [--json]\n"
           "       [--force] [--allow-partial] [--follow-links]\n"
           "\n"
           "Reads the adapter in IN_DIR (or a remote one, as adapter-info takes) and writes it to OUT_DIR in\n"
           "another convention. Every input tensor is mapped (copied, transposed, its scaling folded, rows\n"
           "reordered) or rejected with a reason; the plan is printed. A tensor the output would not hold fails the "
           "run, listing every one, unless\n"
           "--allow-partial. OUT_DIR may be neither IN_DIR nor inside it, and must be empty unless --force.\n"
           "All files are written first and renamed into place together; on failure nothing is left.\n"
           "\n"
           "options:\n";
  if (command == "combine")
    return "usage: peft-bridge combine ADAPTER ADAPTER... [--weights W1,W2,...] -o|--out DIR\n"
           "       [--method cat|linear|svd|ties|ties_svd|dare_linear|dare_ties|dare_linear_svd|dare_ties_svd|\n"
           "                 magnitude_prune|magnitude_prune_svd]\n"
           "       [--rank N] [--density D] [--majority-sign total|frequency] [--svd-clamp Q] [--seed S]\n"
           "       [--peft-compat] [--dtype bf16|f16|f32] [--dry-run] [--json] [--force] [--allow-partial]\n"
           "\n"
           "Combines LoRA adapters (folders, URLs or hf:// addresses, in any format adapter-info reads) into one PEFT\n"
           "adapter, as PEFT's add_weighted_adapter does, module by module in bounded memory. Each adapter's own\n"
           "scaling (alpha/r, rsLoRA, rank_pattern, alpha_pattern) is folded into the new factors, whose runtime\n"
           "scaling is 1 (r = lora_alpha). The default, cat, is exact: ΔW = Σ wᵢ·sᵢ·Bᵢ·Aᵢ for any ranks and\n"
           "weights (rank Σ rᵢ). The summary gives every module's relative error against that exact sum (from\n"
           "r×r Gram matrices), and for the svd methods the energy kept.\n"
           "\n"
           "options:\n";
  if (command == "create") return app::CreateHelpIntro();
  if (command == "extract") return app::ExtractHelpIntro();
  if (command == "push")
    return "usage: peft-bridge push DIR --to OWNER/REPO[@BRANCH] [--create-pr] [--commit-message M] [--private]\n"
           "\n"
           "Pushes the files of the folder DIR (every file under it, by its path in DIR; not .git/ nor\n"
           ".cache/huggingface/, as huggingface_hub's upload_folder) or the one file DIR names to a Hub model repo\n"
           "in one commit, as --push-to pushes a command's output: a missing repo or BRANCH is created (as\n"
           "`hf upload`), large files go through LFS, and a failure leaves no commit. A folder holding the journal\n"
           "of an interrupted peft-bridge run is refused (its output is not complete). HF_TOKEN or huggingface_hub's\n"
           "token file, HF_ENDPOINT. The summary (files, bytes, commit and its URL) is printed on stdout.\n"
           "\n"
           "options:\n";
  if (command == "merge" || command == "unmerge")
    return command == "merge"
               ? "usage: peft-bridge merge --base PATH --adapter DIR -o|--out DIR [--dtype bf16|f16|f32] [--safe]\n"
                 "       [--quantize fp8|int8|int4 [--scheme per-channel|per-group|block] [--group-size 128]]\n"
                 "       [--dry-run] [--json] [--base-config FILE] [--arch NAME] [--force] [--allow-partial]\n"
                 "       [--follow-links] [--no-copy-extra] [--naming-table FILE]... [--threads N]\n"
                 "\n"
                 "Merges a LoRA adapter into a base model as PEFT's merge_and_unload does (fp32 delta, one rounding),\n"
                 "streaming: memory stays flat whatever the model's size. PATH is a .safetensors file or a directory\n"
                 "with model.safetensors or model.safetensors.index.json (shards) and config.json. OUT gets the same\n"
                 "files (shards, index with the new total_size, config.json with the edits the merge needs), written\n"
                 "atomically: every base/adapter mismatch is reported before anything is written, and an interrupted\n"
                 "run leaves nothing under the final names. OUT may be neither an input directory nor inside one, and\n"
                 "must be empty unless --force. Adapter tensors that cannot be applied fail the run unless\n"
                 "--allow-partial. The base directory's other files (tokenizer, generation config, chat templates...:\n"
                 "every file but weights, adapter files and hidden ones; not subdirectories) are copied into OUT with\n"
                 "the rest, so it loads as a model; a base without config.json gets a warning. Both may be remote:\n"
                 "the adapter as adapter-info takes it, the base as an http(s) URL of a .safetensors file or index,\n"
                 "or hf://OWNER/REPO[/FOLDER][@REVISION] (shards read with range requests; docs/remote.md).\n"
                 "\n"
                 "options:\n"
               : "usage: peft-bridge unmerge --base PATH --adapter DIR -o|--out DIR [options as for merge]\n"
                 "\n"
                 "Subtracts the adapter's delta from a merged model with the same engine (W - s*B*A, rounded once).\n"
                 "Not an exact inverse after rounding; DoRA and modules_to_save cannot be unmerged.\n";
  return {};
}

}  // namespace

std::string_view CliHelp(std::string_view command) {
  static const std::map<std::string, std::string, std::less<>> helps = [] {
    std::map<std::string, std::string, std::less<>> all = {{"", std::string(HelpIntro(""))}};
    for (const auto& table : app::OptionTables())
      all[std::string(table.command)] =
          std::string(HelpIntro(table.command)) + (table.lists_options ? app::OptionHelpLines(table.command) : "");
    return all;
  }();
  auto it = helps.find(command);
  return it == helps.end() ? std::string_view() : std::string_view(it->second);
}

}  // namespace pb
