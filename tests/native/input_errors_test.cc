// Errors that say what happened: a file that is not safetensors named for what it looks like (the core's
// ClassifyContent, in every header-length error), an input that is a directory or a config file told what to
// pass instead (app::ExplainInputError, for both CLIs), a merge into the wrong base led by one headline.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/input_hint.h"
#include "app/report.h"
#include "core/content_kind.h"
#include "core/header.h"
#include "merge/plan_problems.h"

namespace pb::testing {
namespace {

std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }
ContentKind Kind(std::string_view s) { return ClassifyContent(Bytes(s)); }

TEST(ContentKind, RecognisesWhatFilesPassedByMistakeLookLike) {
  EXPECT_EQ(Kind("{\"peft_type\": \"LORA\"}"), ContentKind::kJson);
  EXPECT_EQ(Kind("\xef\xbb\xbf\n  [1, 2]"), ContentKind::kJson);  // a byte-order mark and whitespace first
  EXPECT_EQ(Kind("<!DOCTYPE html>"), ContentKind::kHtml);
  EXPECT_EQ(Kind("version https://git-lfs.github.com/spec/v1\n"), ContentKind::kGitLfsPointer);
  EXPECT_EQ(Kind("hello world\n"), ContentKind::kText);
  EXPECT_EQ(Kind("h\xc3\xa9llo w"), ContentKind::kText);  // UTF-8
  EXPECT_EQ(Kind("ab\xe2\x82"), ContentKind::kText);      // a sequence cut by the end of the prefix
  EXPECT_EQ(Kind(std::string_view("PK\x03\x04\x14\x00\x00\x00", 8)), ContentKind::kZip);
  EXPECT_EQ(Kind(std::string_view("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8)), ContentKind::kGzip);
  EXPECT_EQ(Kind(std::string_view("\x80\x02}q\x00(X\x10", 8)), ContentKind::kPickle);
  EXPECT_EQ(Kind(std::string_view("GGUF\x03\x00\x00\x00", 8)), ContentKind::kGguf);
}

TEST(ContentKind, LeavesBinaryAndSafetensorsPrefixesUnclassified) {
  // A real length prefix (N <= 100 MB) has zero high bytes: never text.
  EXPECT_EQ(Kind(std::string_view("\x40\x00\x00\x00\x00\x00\x00\x00", 8)), ContentKind::kUnknown);
  EXPECT_EQ(Kind(std::string_view("\xff\xff\xff\xff\xff\xff\xff\xff", 8)), ContentKind::kUnknown);
  EXPECT_EQ(Kind("ab\x01"
                 "cdefg"),
            ContentKind::kUnknown);  // a control byte
  EXPECT_EQ(Kind("ab\xc3"
                 "cdefg"),
            ContentKind::kUnknown);  // a broken UTF-8 sequence
  EXPECT_EQ(Kind(""), ContentKind::kUnknown);
  EXPECT_EQ(ContentHeadline(ContentKind::kUnknown), "");
}

TEST(ContentKind, HeaderLengthErrorsLeadWithWhatTheFileLooksLike) {
  auto json = ReadHeaderLength(Bytes("{\"a\": 1}\n"), 9);
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.error().code, ErrorCode::HeaderTooLarge);  // the reader's own code: the check that failed
  EXPECT_EQ(json.error().message, "not a safetensors file, it looks like JSON: header length 9021026962656797307 "
                                  "exceeds the limit of 100000000 bytes");
  auto text = ReadHeaderLength(Bytes("hi\n"));
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().code, ErrorCode::HeaderTooSmall);
  EXPECT_EQ(text.error().message,
            "not a safetensors file, it looks like text: file is 3 bytes, fewer than the 8-byte length prefix");
  auto binary = ReadHeaderLength(std::vector<uint8_t>(8, 0xff));
  ASSERT_FALSE(binary.ok());
  EXPECT_EQ(binary.error().message.find("looks like"), std::string::npos);  // nothing to say: unchanged
  auto gguf = ReadHeaderLength(Bytes(std::string_view("GGUF\x03\x00\x00\x00", 8)), 64);
  ASSERT_FALSE(gguf.ok());
  EXPECT_EQ(gguf.error().message.rfind("not a safetensors file, it looks like a GGUF file", 0), 0u)
      << gguf.error().message;
}

Error FormatError() {
  return MakeError(ErrorCode::HeaderTooLarge, "not a safetensors file, it looks like JSON: header length 1 exceeds");
}

TEST(InputHint, ADirectoryGivenForOneFileSaysSo) {
  Error e = app::ExplainInputError(MakeError(ErrorCode::IoError, "`m/` is not a regular file"), {"m/", true},
                                   app::InputRole::kTensorFile);
  EXPECT_EQ(e.code, ErrorCode::IoError);
  EXPECT_EQ(e.message, "`m/` is a directory, not a safetensors file; pass a .safetensors file inside it");
  // Commands that take folders report what the folder lacks themselves.
  Error lacks = MakeError(ErrorCode::IoError, "`m` has neither model.safetensors nor model.safetensors.index.json");
  EXPECT_EQ(app::ExplainInputError(lacks, {"m", true}, app::InputRole::kBase).message, lacks.message);
}

// `owner/repo` as huggingface_hub and transformers take it: nothing is there locally, so the Hub was meant.
TEST(InputHint, AMissingPathThatReadsAsARepoIdPointsAtHf) {
  using app::InputRole;
  const Error missing =
      MakeError(ErrorCode::IoError, "cannot open `meta-llama/Llama-3.2-1B`: No such file or directory");
  for (InputRole role : {InputRole::kTensorFile, InputRole::kAdapter, InputRole::kBase}) {
    Error e = app::ExplainInputError(missing, {"meta-llama/Llama-3.2-1B", false, false}, role);
    EXPECT_EQ(e.code, ErrorCode::IoError);
    EXPECT_EQ(e.message, missing.message + " (did you mean `hf://meta-llama/Llama-3.2-1B`?)");
  }
  // a path that exists, a file name, or no repo id: unchanged
  EXPECT_EQ(app::ExplainInputError(missing, {"meta-llama/Llama-3.2-1B", false, true}, InputRole::kBase).message,
            missing.message);
  for (std::string path : {"runs/model.safetensors", "a/b/c", "./me", "me", "/abs/path", "me/re po"})
    EXPECT_EQ(app::ExplainInputError(missing, {path, false, false}, InputRole::kAdapter).message, missing.message)
        << path;
}

TEST(InputHint, AConfigFilePassedForWeightsPointsAtWhatToPass) {
  using app::InputRole;
  auto explain = [](const std::string& path, InputRole role) {
    return app::ExplainInputError(FormatError(), {path, false}, role);
  };
  Error adapter = explain("runs/lora/adapter_config.json", InputRole::kAdapter);
  EXPECT_EQ(adapter.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(adapter.message, "`runs/lora/adapter_config.json` is an adapter's config, not safetensors weights: "
                             "pass its folder `runs/lora`");
  EXPECT_EQ(explain("adapter_config.json", InputRole::kTensorFile).message,
            "`adapter_config.json` is an adapter's config, not safetensors weights: pass adapter_model.safetensors "
            "beside it");
  EXPECT_EQ(explain("llama/config.json", InputRole::kBase).message,
            "`llama/config.json` is a model's config, not safetensors weights: pass its folder `llama`");
  EXPECT_EQ(explain("llama/model.safetensors.index.json", InputRole::kBase).message,
            "`llama/model.safetensors.index.json` is a sharded model's index, not safetensors weights: pass its folder "
            "`llama`");
  EXPECT_EQ(explain("lora/adapter_config.json", InputRole::kBase).message,
            "`lora/adapter_config.json` is an adapter's config, not safetensors weights: pass the base model's folder "
            "or its .safetensors file");
  // Any other name keeps the format error (which already says what the file looks like).
  EXPECT_EQ(explain("notes.json", InputRole::kTensorFile).message, FormatError().message);
  // So does any error that is not about the file's format.
  Error io = MakeError(ErrorCode::IoError, "cannot open `adapter_config.json`: No such file or directory");
  EXPECT_EQ(app::ExplainInputError(io, {"adapter_config.json", false}, InputRole::kAdapter).message, io.message);
}

merge::ModelFacts GptAdapterLlamaBase() { return {"gpt2", "GPT2LMHeadModel", "LlamaForCausalLM", 36}; }

TEST(PlanProblems, TheWrongBaseLeadsWithOneHeadline) {
  EXPECT_EQ(merge::MissingModulesHeadline(GptAdapterLlamaBase(), 36),
            "adapter trained on gpt2 (GPT2LMHeadModel); base is LlamaForCausalLM: 0 of 36 modules found");
  EXPECT_EQ(merge::MissingModulesHeadline({std::nullopt, "GPT2LMHeadModel", std::nullopt, 4}, 1),
            "adapter for GPT2LMHeadModel: 3 of 4 modules found in the base");
  EXPECT_EQ(merge::MissingModulesHeadline({std::nullopt, std::nullopt, "llama", 4}, 4),
            "base is llama: 0 of 4 adapter modules found");
  EXPECT_EQ(merge::MissingModulesHeadline({}, 2), "0 of 2 adapter modules found in the base");
}

TEST(PlanProblems, MissingModulesHaveTheirOwnCodeAndTheListIsCapped) {
  std::vector<Problem> problems;
  problems.push_back({ErrorCode::ShapeMismatch, "lm_head", "`lm_head.weight` is [2, 2] but ..."});
  for (int i = 0; i < 36; ++i)
    problems.push_back({ErrorCode::ModulesNotFound, "h." + std::to_string(i) + ".attn.c_attn",
                        "adapter module `h." + std::to_string(i) + ".attn.c_attn`: the base has no tensor"});
  Error e = merge::PlanProblemsError(problems, GptAdapterLlamaBase());
  EXPECT_EQ(e.code, ErrorCode::ModulesNotFound);
  const std::string first_line = e.message.substr(0, e.message.find('\n'));
  EXPECT_EQ(first_line, "adapter trained on gpt2 (GPT2LMHeadModel); base is LlamaForCausalLM: 0 of 36 modules found:");
  // The missing modules first, 20 lines, then the count of the rest; the problems themselves are all kept.
  EXPECT_NE(e.message.find("\n  adapter module `h.0.attn.c_attn`"), std::string::npos);
  EXPECT_EQ(e.message.find("h.20.attn"), std::string::npos) << e.message;
  EXPECT_TRUE(e.message.ends_with("\n  and 17 more")) << e.message;
  ASSERT_EQ(e.problems.size(), 37u);
  EXPECT_EQ(e.problems.back().code, ErrorCode::ShapeMismatch);  // stable: the mismatch after the 36

  auto json = nlohmann::json::parse(RenderErrorJson(e));
  EXPECT_EQ(json["error"]["code"], "ModulesNotFound");
  ASSERT_TRUE(json["error"]["problems"].is_array());
  ASSERT_EQ(json["error"]["problems"].size(), 37u);
  EXPECT_EQ(json["error"]["problems"][0],
            (nlohmann::json{{"code", "ModulesNotFound"},
                            {"module", "h.0.attn.c_attn"},
                            {"message", "adapter module `h.0.attn.c_attn`: the base has no tensor"}}));
  EXPECT_EQ(RenderErrorText(e), "error: ModulesNotFound: " + e.message + "\n");
}

TEST(PlanProblems, WithoutMissingModulesTheCodesStayAsTheyWere) {
  Error refusals = merge::PlanProblemsError({{ErrorCode::UnsupportedAdapter, "x", "no"}}, {});
  EXPECT_EQ(refusals.code, ErrorCode::UnsupportedAdapter);
  EXPECT_EQ(refusals.message, "1 problem(s) between the base model and the adapter:\n  no");
  Error mixed = merge::PlanProblemsError(
      {{ErrorCode::UnsupportedAdapter, "x", "no"}, {ErrorCode::ShapeMismatch, "y", "bad"}}, {});
  EXPECT_EQ(mixed.code, ErrorCode::ShapeMismatch);
  // An error without problems renders as before: no "problems" member.
  EXPECT_FALSE(
      nlohmann::json::parse(RenderErrorJson(MakeError(ErrorCode::IoError, "x")))["error"].contains("problems"));
}

}  // namespace
}  // namespace pb::testing
