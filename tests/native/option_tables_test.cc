#include "app/option_tables.h"

#include <gtest/gtest.h>

#include "app/cli_text.h"
#include "core/dtype.h"
#include "core/dtype_vocabulary.h"

namespace pb::app {
namespace {

Result<CommandLine> Read(std::string_view command, const char* json) {
  return OptionsCommandLine(command, Json::parse(json));
}

std::string Refusal(std::string_view command, const char* json) {
  auto r = Read(command, json);
  if (r.ok()) {
    ADD_FAILURE() << json << " was accepted";
    return {};
  }
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument) << json;
  return r.error().message;
}

TEST(OptionTables, HelpLinesPadToTheColumnThenTwoSpacesAfterALongHead) {
  EXPECT_EQ(OptionHelpLines("inspect"),
            "  --json    print one JSON object; on invalid input {\"ok\":false,\"error\":{...}}\n"
            "  --help    show this help\n");
  const std::string push = OptionHelpLines("push");
  EXPECT_EQ(push.substr(0, push.find('\n') + 1),
            "  --to OWNER/REPO[@BRANCH]  the repo, and the branch (default main)\n");
  // A help lists its options after "options:", and unmerge's names merge's instead.
  EXPECT_TRUE(std::string(CliHelp("merge")).ends_with("options:\n" + OptionHelpLines("merge")));
  EXPECT_EQ(std::string(CliHelp("unmerge")).find("--dtype D"), std::string::npos);
}

TEST(OptionTables, EveryCommandOfTheGrammarHasATableAndEveryOptionItsKind) {
  for (const char* command :
       {"inspect", "convert", "adapter-info", "translate", "combine", "merge", "unmerge", "create", "extract", "push"})
    EXPECT_NE(FindOptionTable(command), nullptr) << command;
  // The grammar takes exactly the table's CLI names: a JS-only key is no option.
  std::vector<std::string> args = {"merge", "--base", "b", "--adapter", "a", "--dry-run", "--unmerge"};
  auto parsed = ParseCommandLine(args);
  ASSERT_TRUE(std::holds_alternative<UsageError>(parsed));
  EXPECT_EQ(std::get<UsageError>(parsed).message, "unknown option `--unmerge`");
}

TEST(OptionTables, AJsOptionsObjectIsReadAsTheCliReadsItsOptions) {
  auto create = Read("create", R"({"dtype": "bfloat16", "dryRun": true, "r": 4, "alpha": 0.5, "rslora": false,
                                   "targetModules": ["q_proj", "v_proj"], "init": null, "base": "a/b"})");
  ASSERT_TRUE(create.ok()) << create.error().message;
  EXPECT_EQ(create->Value("dtype"), "bf16");  // normalised by the grammar, as --dtype bfloat16
  EXPECT_TRUE(create->Has("dry-run"));
  EXPECT_FALSE(create->Has("rslora"));
  EXPECT_EQ(create->Value("r"), "4");
  EXPECT_EQ(create->Value("alpha"), "0.5");
  EXPECT_EQ(create->Value("target-modules"), "q_proj,v_proj");
  EXPECT_FALSE(create->Has("init"));
  EXPECT_FALSE(create->Has("base"));  // an input: the caller's to read
  auto merge = Read("merge", R"({"copyExtra": false, "quantize": "int4", "groupSize": 64, "allowPartial": true})");
  ASSERT_TRUE(merge.ok()) << merge.error().message;
  EXPECT_TRUE(merge->Has("no-copy-extra"));
  EXPECT_EQ(merge->Value("group-size"), "64");
  EXPECT_TRUE(merge->Has("allow-partial"));
  auto no_weights = Read("combine", R"({"weights": [], "method": "cat", "seed": 0})");  // CombineOptionsToJson's
  ASSERT_TRUE(no_weights.ok()) << no_weights.error().message;
  EXPECT_FALSE(no_weights->Has("weights"));
  auto kept = Read("merge", R"({"copyExtra": true})");
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->Has("no-copy-extra"));
}

TEST(OptionTables, ABadValueIsRefusedWithTheGrammarsMessage) {
  EXPECT_EQ(Refusal("create", R"({"dtype": "f8"})"), "unknown dtype `f8` (expected bf16, f16 or f32)");
  EXPECT_EQ(Refusal("merge", R"({"dtype": 16})"), "unknown dtype `16` (expected bf16, f16 or f32)");
  EXPECT_EQ(Refusal("extract", R"({"embeddings": "keep"})"), "unknown embeddings `keep` (expected save, lora or skip)");
  EXPECT_EQ(Refusal("combine", R"({"weights": [1, "x"]})"),
            "--weights: `x` is not a number (W1,W2,... one per adapter)");
  EXPECT_EQ(Refusal("merge", R"({"scheme": "block"})"), "--scheme needs --quantize fp8|int8|int4");
  EXPECT_EQ(Refusal("translate", R"({"to": "peft", "outtype": "f16"})"),
            "--outtype applies to --to gguf only (the other formats keep the adapter's dtypes)");
  EXPECT_EQ(Refusal("merge", R"({"safe": "yes"})"), "merge option `safe` must be a boolean");
  EXPECT_EQ(Refusal("create", R"({"r": {"n": 4}})"), "create option `r` must be a string or a number");
  EXPECT_EQ(Refusal("merge", "[]"), "merge options are not a JSON object");
}

TEST(OptionTables, TheDumpNamesEveryRowOnce) {
  const Json dump = OptionTablesJson();
  ASSERT_TRUE(dump.contains("merge"));
  size_t dtype_rows = 0;
  for (const auto& row : dump["merge"]) {
    EXPECT_TRUE(!row["name"].get<std::string>().empty() || !row["js"].get<std::string>().empty());
    if (row["kind"] == "dtype") ++dtype_rows;
  }
  EXPECT_EQ(dtype_rows, 1u);
}

TEST(DtypeVocabulary, EverySpellingInAnyCaseAndOneRefusal) {
  for (auto n : {"bf16", "BF16", "bfloat16", "BFloat16"}) EXPECT_EQ(ParseFloatDtypeName(n), Dtype::BF16) << n;
  for (auto n : {"f16", "FP16", "float16", "Half"}) EXPECT_EQ(ParseFloatDtypeName(n), Dtype::F16) << n;
  for (auto n : {"f32", "fp32", "Float32", "FLOAT"}) EXPECT_EQ(ParseFloatDtypeName(n), Dtype::F32) << n;
  auto bad = ParseFloatDtypeOption("f64");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(bad.error().message, "unknown dtype `f64` (expected bf16, f16 or f32)");
  EXPECT_EQ(FloatDtypeOptionName(Dtype::BF16), "bf16");
}

}  // namespace
}  // namespace pb::app
