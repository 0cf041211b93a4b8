#include "core/cli_text.h"

namespace pb {

std::string_view CliHelp(std::string_view command) {
  if (command.empty())
    return "usage: peft-bridge <command> [options]\n"
           "\n"
           "Inspect, validate and convert safetensors files and LoRA adapters.\n"
           "\n"
           "commands:\n"
           "  inspect FILE [--json]                  list tensors, metadata and parameter counts\n"
           "  convert IN OUT --dtype bf16|f16|f32    convert floating-point tensors, streaming\n"
           "  adapter-info DIR [--json]              a LoRA adapter's modules, ranks, scaling and rejects\n"
           "  translate IN_DIR OUT_DIR --to FORMAT   rewrite an adapter as peft, mlx, kohya or gguf-names\n"
           "  merge --base PATH --adapter DIR --out DIR   merge a LoRA adapter into a model, streaming\n"
           "  unmerge --base PATH --adapter DIR --out DIR subtract a merged adapter again\n"
           "\n"
           "options:\n"
           "  --help       show help (also after a command)\n"
           "  --version    print the version\n"
           "\n"
           "Exit status: 0 success, 1 invalid input or I/O failure, 2 usage error.\n";
  if (command == "inspect")
    return "usage: peft-bridge inspect FILE [--json]\n"
           "\n"
           "Validates FILE as the reference safetensors reader does and lists its tensors (name, dtype,\n"
           "shape, bytes), its metadata and the parameter count per dtype.\n"
           "\n"
           "options:\n"
           "  --json    print one JSON object; on invalid input {\"ok\":false,\"error\":{...}}\n"
           "  --help    show this help\n";
  if (command == "convert")
    return "usage: peft-bridge convert IN OUT --dtype bf16|f16|f32 [--order reference|input] [--json]\n"
           "\n"
           "Converts every F16, BF16, F32, F64, F8_E4M3 and F8_E5M2 tensor of IN to the given dtype\n"
           "(round to nearest even), copies the others, keeps the metadata, and writes OUT atomically\n"
           "(temporary file, then rename). IN is never modified.\n"
           "\n"
           "options:\n"
           "  --dtype D          target dtype: bf16, f16 or f32\n"
           "  --order reference  tensor order of Python safetensors: dtype descending, then name (default)\n"
           "  --order input      keep IN's order\n"
           "  --json             print a JSON summary (or a JSON error)\n"
           "  --help             show this help\n";
  if (command == "adapter-info")
    return "usage: peft-bridge adapter-info DIR [--json] [--from FORMAT] [--arch NAME] [--base-config FILE] [--strict]\n"
           "\n"
           "Reads a LoRA adapter (PEFT, mlx-lm, kohya or llama.cpp names; detected from the files) with PEFT's\n"
           "meaning and lists its modules with rank, alpha and scaling, its other tensors, dtypes, parameter\n"
           "count, unknown config keys, and every tensor that would be rejected, with the reason. DIR may also be\n"
           "the .safetensors file itself.\n"
           "\n"
           "options:\n"
           "  --json              print one JSON object; on invalid input {\"ok\":false,\"error\":{...}}\n"
           "  --from FORMAT       peft, mlx, kohya or gguf-names instead of detecting it\n"
           "  --arch NAME         naming table to use (llama, gpt2, ...); default: from --base-config or the keys\n"
           "  --base-config FILE  the base model's config.json (architecture, head counts, layer count)\n"
           "  --strict            fail with UnresolvedTensor if any tensor is not understood\n"
           "  --help              show this help\n";
  if (command == "translate")
    return "usage: peft-bridge translate IN_DIR OUT_DIR --to peft|mlx|kohya|gguf-names [--arch NAME]\n"
           "       [--base-config FILE] [--from FORMAT] [--dry-run] [--strict] [--old-peft] [--json]\n"
           "\n"
           "Reads the adapter in IN_DIR and writes it to OUT_DIR in another convention. Every input tensor is\n"
           "mapped (copied, transposed, its scaling folded, rows reordered) or rejected with a reason; the\n"
           "plan is printed. Files are written atomically; on failure nothing is left under their names.\n"
           "\n"
           "options:\n"
           "  --to FORMAT         peft (adapter_model.safetensors + adapter_config.json), mlx (adapters.safetensors\n"
           "                      + adapter_config.json), kohya, or gguf-names (llama.cpp's names and layout)\n"
           "  --dry-run           print the plan, write nothing\n"
           "  --strict            fail with UnresolvedTensor if any tensor cannot be mapped\n"
           "  --old-peft          write a config PEFT < 0.14 accepts (fails if a newer field matters)\n"
           "  --from, --arch, --base-config, --json   as for adapter-info\n"
           "  --help              show this help\n";
  if (command == "merge" || command == "unmerge")
    return command == "merge"
               ? "usage: peft-bridge merge --base PATH --adapter DIR --out DIR [--dtype bf16|f16|f32] [--safe]\n"
                 "       [--dry-run] [--json] [--base-config FILE] [--arch NAME]\n"
                 "\n"
                 "Merges a LoRA adapter into a base model as PEFT's merge_and_unload does (fp32 delta, one rounding),\n"
                 "streaming: memory stays flat whatever the model's size. PATH is a .safetensors file or a directory\n"
                 "with model.safetensors or model.safetensors.index.json (shards) and config.json. OUT gets the same\n"
                 "files (shards, index with the new total_size, config.json with the edits the merge needs), written\n"
                 "atomically: every base/adapter mismatch is reported before anything is written, and an interrupted\n"
                 "run leaves nothing under the final names.\n"
                 "\n"
                 "options:\n"
                 "  --dtype D          output dtype of floating-point tensors (default: each tensor's own)\n"
                 "  --safe             fail on NaN or Inf in a merged tensor, naming the module\n"
                 "  --dry-run          plan and report, write nothing\n"
                 "  --json             print a JSON summary (modules, tensors, unmatched keys, bytes, time, memory)\n"
                 "  --base-config FILE the base config.json, when it is not beside the weights\n"
                 "  --arch NAME        naming table to use (default: from config.json or the adapter's keys)\n"
                 "  --help             show this help\n"
               : "usage: peft-bridge unmerge --base PATH --adapter DIR --out DIR [options as for merge]\n"
                 "\n"
                 "Subtracts the adapter's delta from a merged model with the same engine (W - s*B*A, rounded once).\n"
                 "Not an exact inverse after rounding; DoRA and modules_to_save cannot be unmerged.\n";
  return {};
}

}  // namespace pb
