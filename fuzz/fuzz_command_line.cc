// libFuzzer target for the command-line grammar both CLIs share (src/app/command_line.h).
//
// Input: the argument vector, one argument per NUL-separated piece (compact encoding expanded first, so an
// argument can be megabytes long). No crash and no exception for any vector, and (abort() on failure):
//   - a usage error renders as "error: <one line>\nrun `peft-bridge[ <command>] --help` for usage\n" (with --json
//     among the arguments: a JSON document whose "usage" holds the hint), the line of bounded length (arguments are
//     echoed clipped) and valid UTF-8 when the arguments are;
//   - CommandLineJson (what the npm CLI receives) is always JSON that ParseJson reads back, and agrees with
//     ParseCommandLine: a usageError exactly when the parse fails, else the same command and positionals;
//   - a parsed `--dtype` is one of bf16, f16, f32 (the spellings users know are normalised);
//   - the grammar is deterministic: parsing the same vector twice gives the same JSON.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>
#include <vector>

#include "app/command_line.h"
#include "core/json.h"
#include "core/utf8.h"
#include "fuzz_input.h"
#include "json_mutator.h"

namespace {

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_command_line: %s\n%s\n", what.c_str(), detail.substr(0, 4000).c_str());
  std::abort();
}

}  // namespace

PB_FUZZ_DEFINE_MUTATOR((pb::fuzz::MutatorVocabulary{
    {"inspect",
     "convert",
     "adapter-info",
     "translate",
     "merge",
     "unmerge",
     "help",
     "--help",
     "-h",
     "-V",
     "--version",
     "--json",
     "--dtype",
     "--dtype=bf16",
     "--to",
     "--to=kohya",
     "--from",
     "--base",
     "--adapter",
     "--out",
     "-o",
     "-q",
     "--quiet",
     "--no-progress",
     "--force",
     "--dry-run",
     "--allow-partial",
     "--follow-links",
     "--order",
     "--",
     "-",
     "--safe",
     "--old-peft",
     "--strict",
     "--arch",
     "--base-config"},
    {"bf16", "BFloat16", "fp16", "half", "float32", "peft", "mlx", "kohya", "gguf-names", "reference", "input",
     "x.safetensors", "\xc3\xa9", "\xe2\x80\xa6"}}))

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input = pb::fuzz::Expand(std::string_view(reinterpret_cast<const char*>(data), size));
  std::vector<std::string> args;
  size_t start = 0;
  while (start <= input.size() && args.size() < 256) {
    size_t nul = input.find('\0', start);
    if (nul == std::string::npos) nul = input.size();
    args.emplace_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  if (input.empty()) args.clear();
  bool all_utf8 = true;
  for (const auto& a : args) all_utf8 = all_utf8 && pb::IsValidUtf8(a);

  auto parsed = pb::app::ParseCommandLine(args);
  const std::string json = pb::app::CommandLineJson(args);
  if (pb::app::CommandLineJson(args) != json) Fail("CommandLineJson is not deterministic");
  auto doc = pb::ParseJson(json, "CommandLineJson");
  if (!doc.ok()) Fail("CommandLineJson is not JSON: " + doc.error().message, json);
  const pb::Json& d = doc.value();

  if (auto* usage = std::get_if<pb::app::UsageError>(&parsed)) {
    const std::string text = pb::app::RenderUsageError(*usage);
    if (usage->json) {  // --json among the arguments: one JSON document, the hint in "usage"
      auto parsed_error = pb::ParseJson(text, "usage error");
      if (!parsed_error.ok()) Fail("usage error JSON", text);
      const pb::Json& e = parsed_error.value();
      if (!e.is_object() || !e.contains("ok") || e["ok"] != false || !e.contains("usage") || !e["usage"].is_string() ||
          !e["usage"].get<std::string>().ends_with("` for usage"))
        Fail("usage error JSON", text);
    } else if (!text.starts_with("error: ") || !text.ends_with("` for usage\n")) {
      Fail("usage error text", text);
    }
    const size_t first_line = text.find('\n');
    if (first_line > 1500) Fail("a usage error line is not clipped", text.substr(0, 300));
    if (all_utf8 && !pb::IsValidUtf8(text)) Fail("a usage error is not valid UTF-8 for valid UTF-8 arguments", text);
    if (!d.contains("usageError") || !d["usageError"].is_string()) Fail("no usageError in the JSON", json);
    if (all_utf8 && d["usageError"].get<std::string>() != text) Fail("usageError differs from the rendered text");
    return 0;
  }
  const auto& line = std::get<pb::app::CommandLine>(parsed);
  if (d.contains("usageError")) Fail("usageError for a command line that parsed", json);
  if (all_utf8) {
    if (d["command"].get<std::string>() != line.command) Fail("command differs", json);
    if (d["positional"].size() != line.positional.size()) Fail("positionals differ", json);
  }
  if (auto dtype = line.Value("dtype"); dtype && *dtype != "bf16" && *dtype != "f16" && *dtype != "f32")
    Fail("an unnormalised dtype", *dtype);
  return 0;
}
