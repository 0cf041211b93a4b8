#include "core/cli_text.h"

namespace pb {

std::string_view CliHelp(std::string_view command) {
  if (command.empty())
    return "usage: peft-bridge <command> [options]\n"
           "\n"
           "Inspect, validate and convert safetensors files.\n"
           "\n"
           "commands:\n"
           "  inspect FILE [--json]                  list tensors, metadata and parameter counts\n"
           "  convert IN OUT --dtype bf16|f16|f32    convert floating-point tensors, streaming\n"
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
  return {};
}

}  // namespace pb
