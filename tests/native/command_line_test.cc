#include "app/command_line.h"

#include <gtest/gtest.h>

#include "core/dtype_vocabulary.h"

namespace pb::app {
namespace {

std::variant<CommandLine, UsageError> Parse(std::vector<std::string> args) { return ParseCommandLine(args); }

CommandLine Ok(std::vector<std::string> args) {
  auto r = Parse(args);
  if (auto* e = std::get_if<UsageError>(&r)) ADD_FAILURE() << e->message;
  return std::holds_alternative<CommandLine>(r) ? std::get<CommandLine>(r) : CommandLine{};
}

std::string Usage(std::vector<std::string> args) {
  auto r = Parse(args);
  if (!std::holds_alternative<UsageError>(r)) {
    ADD_FAILURE() << "parsed";
    return {};
  }
  return RenderUsageError(std::get<UsageError>(r));
}

TEST(CommandLine, ValuesBothWaysAndShortAliases) {
  auto a = Ok({"merge", "--base", "b", "--adapter=a", "-o", "out", "--dtype=BF16", "-q"});
  EXPECT_EQ(a.command, "merge");
  EXPECT_EQ(a.Value("base"), "b");
  EXPECT_EQ(a.Value("adapter"), "a");
  EXPECT_EQ(a.Value("out"), "out");
  EXPECT_EQ(a.Value("dtype"), "bf16");  // spellings normalised
  EXPECT_TRUE(a.Has("quiet"));
  auto b = Ok({"convert", "in", "out", "--dtype", "float16", "--order=input"});
  EXPECT_EQ(b.Value("dtype"), "f16");
  EXPECT_EQ(b.positional, (std::vector<std::string>{"in", "out"}));
  EXPECT_EQ(b.Value("order"), "input");
  auto c = Ok({"inspect", "--", "-odd-name.safetensors"});
  EXPECT_EQ(c.positional, (std::vector<std::string>{"-odd-name.safetensors"}));
}

TEST(CommandLine, NoCopyExtraIsAMergeFlag) {
  EXPECT_TRUE(Ok({"merge", "--base", "b", "--adapter", "a", "-o", "out", "--no-copy-extra"}).Has("no-copy-extra"));
  EXPECT_TRUE(Ok({"unmerge", "--base", "b", "--adapter", "a", "-o", "out", "--no-copy-extra"}).Has("no-copy-extra"));
  EXPECT_FALSE(Ok({"merge", "--base", "b", "--adapter", "a", "-o", "out"}).Has("no-copy-extra"));
  EXPECT_EQ(Usage({"merge", "--base", "b", "--adapter", "a", "-o", "out", "--no-copy-extra=yes"}),
            "error: --no-copy-extra takes no value\nrun `peft-bridge merge --help` for usage\n");
  EXPECT_EQ(Usage({"translate", "a", "b", "--to", "peft", "--no-copy-extra"}),
            "error: unknown option `--no-copy-extra`\nrun `peft-bridge translate --help` for usage\n");
}

TEST(CommandLine, HelpAndVersion) {
  EXPECT_TRUE(Ok({"--help"}).help);
  EXPECT_TRUE(Ok({"-h"}).help);
  EXPECT_EQ(Ok({"help", "merge"}).command, "merge");
  auto h = Ok({"merge", "--help"});  // no required options needed for help
  EXPECT_TRUE(h.help);
  EXPECT_EQ(h.command, "merge");
  EXPECT_TRUE(Ok({"-V"}).version);
  EXPECT_TRUE(Ok({"--version"}).version);
}

TEST(CommandLine, UsageErrorsAreOneLineAndAHint) {
  EXPECT_EQ(Usage({}), "error: missing command\nrun `peft-bridge --help` for usage\n");
  EXPECT_EQ(Usage({"bogus"}), "error: unknown command `bogus`\nrun `peft-bridge --help` for usage\n");
  EXPECT_EQ(Usage({"merge", "--adapter", "a", "-o", "x"}),
            "error: --base is required\nrun `peft-bridge merge --help` for usage\n");
  EXPECT_EQ(Usage({"merge", "--base", "b", "--adapter", "a"}),
            "error: -o/--out is required (or --dry-run)\nrun `peft-bridge merge --help` for usage\n");
  EXPECT_EQ(Usage({"convert", "a", "b", "--dtype", "f64"}),
            "error: unknown dtype `f64` (expected bf16, f16 or f32)\nrun `peft-bridge convert --help` for usage\n");
  EXPECT_EQ(Usage({"convert", "a", "b", "--dtype"}),
            "error: --dtype needs a value\nrun `peft-bridge convert --help` for usage\n");
  EXPECT_EQ(Usage({"inspect", "--json=1", "f"}),
            "error: --json takes no value\nrun `peft-bridge inspect --help` for usage\n");
  EXPECT_EQ(Usage({"inspect", "a", "b"}),
            "error: expected exactly one FILE\nrun `peft-bridge inspect --help` for usage\n");
  EXPECT_EQ(Usage({"translate", "a", "b", "--to", "onnx"}),
            "error: unknown to `onnx` (expected peft, mlx, kohya, gguf-names or gguf)\nrun `peft-bridge translate "
            "--help` for usage\n");
  EXPECT_EQ(Usage({"merge", "--base", "a", "--base", "b"}),
            "error: --base given twice\nrun `peft-bridge merge --help` for usage\n");
}

TEST(CommandLine, QuantizeOptions) {
  auto m = Ok({"merge", "--base", "b", "--adapter", "a", "-o", "x", "--quantize", "int4", "--group-size=64"});
  EXPECT_EQ(m.Value("quantize"), "int4");
  EXPECT_EQ(m.Value("group-size"), "64");
  auto c = Ok({"convert", "model", "out", "--quantize", "fp8", "--scheme", "block", "--dry-run"});
  EXPECT_EQ(c.Value("scheme"), "block");
  const std::string hint = "\nrun `peft-bridge merge --help` for usage\n";
  EXPECT_EQ(Usage({"merge", "--base", "b", "--adapter", "a", "-o", "x", "--scheme", "block"}),
            "error: --scheme needs --quantize fp8|int8|int4" + hint);
  EXPECT_EQ(Usage({"merge", "--base", "b", "--adapter", "a", "-o", "x", "--quantize", "nf4"}),
            "error: unknown quantize `nf4` (expected fp8, int8 or int4)" + hint);
  EXPECT_EQ(Usage({"merge", "--base", "b", "--adapter", "a", "-o", "x", "--quantize", "int8", "--scheme", "block"}),
            "error: --scheme block is fine-grained FP8: it needs --quantize fp8" + hint);
  EXPECT_EQ(Usage({"merge", "--base", "b", "--adapter", "a", "-o", "x", "--quantize", "int8", "--group-size", "0"}),
            "error: --group-size must be a positive integer, not `0`" + hint);
  EXPECT_EQ(Usage({"unmerge", "--base", "b", "--adapter", "a", "-o", "x", "--quantize", "int8"}),
            "error: unknown option `--quantize`\nrun `peft-bridge unmerge --help` for usage\n");
  const std::string convert = "\nrun `peft-bridge convert --help` for usage\n";
  EXPECT_EQ(Usage({"convert", "a", "b"}), "error: --dtype is required" + convert);
  EXPECT_EQ(Usage({"convert", "a", "b", "--quantize", "fp8", "--order", "input"}),
            "error: --order applies to convert without --quantize (which writes a model folder in the input's order)" +
                convert);
}

// convert of a model (its folder, its index, a Hub repo) writes a model folder, as --quantize does; one file, one file.
TEST(CommandLine, ConvertOfAModelWritesAModelFolder) {
  EXPECT_FALSE(
      ConvertWritesModelFolder(Ok({"convert", "m/model.safetensors", "o.safetensors", "--dtype", "bf16"}), false));
  EXPECT_TRUE(ConvertWritesModelFolder(Ok({"convert", "m", "o", "--dtype", "bf16"}), true));
  EXPECT_TRUE(
      ConvertWritesModelFolder(Ok({"convert", "m/model.safetensors.index.json", "o", "--dtype", "bf16"}), false));
  EXPECT_TRUE(ConvertWritesModelFolder(Ok({"convert", "hf://me/m", "o", "--dtype", "bf16"}), false));
  EXPECT_TRUE(ConvertWritesModelFolder(
      Ok({"convert", "hf://me/m@v1/model.safetensors.index.json", "o", "--dtype", "f16"}), false));
  EXPECT_FALSE(ConvertWritesModelFolder(
      Ok({"convert", "hf://me/m/model.safetensors", "o.safetensors", "--dtype", "f16"}), false));
  EXPECT_TRUE(ConvertWritesModelFolder(Ok({"convert", "m.safetensors", "o", "--quantize", "fp8"}), false));
  // what each route takes is known once IN is: --dry-run and --base-config act on a model folder only
  EXPECT_EQ(ConvertUsageProblem(Ok({"convert", "a", "b", "--dtype", "bf16", "--dry-run"}), false),
            "--dry-run applies to convert --quantize or of a model (its folder, its index or a Hub repo)");
  EXPECT_EQ(
      ConvertUsageProblem(Ok({"convert", "m", "o", "--dtype", "bf16", "--dry-run", "--base-config", "c.json"}), true),
      std::nullopt);
  EXPECT_EQ(ConvertUsageProblem(Ok({"convert", "m", "o", "--dtype", "bf16", "--order", "input"}), true),
            "--order applies to the convert of one .safetensors file (a model folder is written in the input's order)");
  EXPECT_EQ(ConvertUsageProblem(Ok({"convert", "m", "o", "--dtype", "bf16"}), true), std::nullopt);
  EXPECT_EQ(ConvertUsageProblem(
                Ok({"convert", "m.safetensors", "o.safetensors", "--dtype", "bf16", "--order", "input"}), false),
            std::nullopt);
  EXPECT_EQ(ConvertUsageProblem(Ok({"convert", "m", "o.safetensors", "--dtype", "bf16"}), true),
            "convert of a model (`m`: a folder, an index or a Hub repo) writes a model folder, and OUT `o.safetensors` "
            "names a .safetensors file; name a folder (or convert one shard)");
}

TEST(CommandLine, EchoedArgumentsAreCapped) {
  std::string huge(1 << 20, 'x');
  std::string text = Usage({"inspect", "--" + huge});
  EXPECT_LT(text.size(), 400u);
  EXPECT_NE(text.find("(1048578 bytes)"), std::string::npos);
}

TEST(CommandLine, DtypeVocabulary) {
  for (auto n : {"bf16", "BF16", "bfloat16", "BFloat16"}) EXPECT_EQ(ParseFloatDtypeName(n), Dtype::BF16) << n;
  for (auto n : {"f16", "fp16", "float16", "F16", "half"}) EXPECT_EQ(ParseFloatDtypeName(n), Dtype::F16) << n;
  for (auto n : {"f32", "fp32", "float32", "FP32", "float"}) EXPECT_EQ(ParseFloatDtypeName(n), Dtype::F32) << n;
  for (auto n : {"f64", "int8", "", "bf"}) EXPECT_FALSE(ParseFloatDtypeName(n)) << n;
}

TEST(CommandLine, JsonForTheNpmCli) {
  EXPECT_EQ(CommandLineJson(std::vector<std::string>{"inspect", "f", "--json"}),
            R"({"command":"inspect","help":false,"options":{"json":[""]},"positional":["f"],"version":false})");
  EXPECT_EQ(CommandLineJson(std::vector<std::string>{"nope"}),
            R"({"usageError":"error: unknown command `nope`\nrun `peft-bridge --help` for usage\n"})");
}

}  // namespace
}  // namespace pb::app
