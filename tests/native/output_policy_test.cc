// The output policy on crafted facts: aliasing, non-empty directories, --force's stale files, links leaving an
// input directory, names taken by directories, and the dropped-tensor rule.
#include <gtest/gtest.h>

#include <functional>

#include "app/output_policy.h"
#include "app/output_policy_json.h"

namespace pb::app {
namespace {

InputFact Dir(const std::string& label, const std::string& path, const std::string& real) {
  return {label, path, real, real, "1:" + std::to_string(std::hash<std::string>()(real) % 1000), true, std::nullopt, ""};
}

InputFact File(const std::string& label, const std::string& path, const std::string& real, const std::string& id,
               std::optional<std::string> within = std::nullopt, const std::string& within_path = "") {
  size_t slash = real.rfind('/');
  return {label, path, real, real.substr(0, slash) + "/" + path.substr(path.rfind('/') + 1), id, false, within, within_path};
}

OutputRequest Out(const std::string& path, const std::string& real, std::vector<OutputEntry> listing,
                  std::vector<std::string> writes) {
  OutputRequest o;
  o.label = "OUT_DIR";
  o.path = path;
  o.real = real;
  o.exists = !listing.empty();
  o.listing = std::move(listing);
  o.writes = std::move(writes);
  return o;
}

// translate rob OUT: the adapter directory, its weights and config.
std::vector<InputFact> Rob() {
  return {Dir("IN_DIR", "rob", "/w/rob"),
          File("IN_DIR", "rob/adapter_model.safetensors", "/w/rob/adapter_model.safetensors", "1:10", "/w/rob", "rob"),
          File("IN_DIR", "rob/adapter_config.json", "/w/rob/adapter_config.json", "1:11", "/w/rob", "rob")};
}

const std::vector<std::string> kPeft = {"adapter_model.safetensors", "adapter_config.json"};

TEST(OutputPolicy, AFreshDirectoryCommitsEveryFileInOrder) {
  auto plan = PlanOutput("translate", Rob(), Out("out", "/w/out", {}, kPeft), {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->commit, kPeft);
  EXPECT_TRUE(plan->replace.empty());
  EXPECT_TRUE(plan->remove.empty());
}

TEST(OutputPolicy, TheInputDirectoryItselfIsRefusedEvenWithForce) {
  auto out = Out("rob", "/w/rob", {{"adapter_model.safetensors", EntryKind::kFile, "1:10"}}, kPeft);
  for (bool force : {false, true}) {
    auto plan = PlanOutput("translate", Rob(), out, {force, false});
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(plan.error().message,
              "OUT_DIR `rob` is the input directory IN_DIR `rob`; translate never writes over its inputs");
  }
}

TEST(OutputPolicy, AnOutputInsideAnInputDirectoryIsRefused) {
  auto plan = PlanOutput("translate", Rob(), Out("rob/sub", "/w/rob/sub", {}, kPeft), {true, true});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message,
            "OUT_DIR `rob/sub` is inside the input directory IN_DIR `rob`; translate never writes over its inputs");
  // A sibling whose name merely starts with the input's is not inside it.
  EXPECT_TRUE(PlanOutput("translate", Rob(), Out("robot", "/w/robot", {}, kPeft), {}).ok());
}

TEST(OutputPolicy, AFileInputAmongTheOutputsIsRefusedByPathOrIdentity) {
  // --base-config out/config.json with --force: merge would write config.json over it.
  std::vector<InputFact> inputs = {File("--base-config", "out/config.json", "/w/out/config.json", "1:50")};
  OutputRequest out = Out("out", "/w/out", {{"config.json", EntryKind::kFile, "1:50"}}, {"model.safetensors", "config.json"});
  out.label = "--out";
  auto plan = PlanOutput("merge", inputs, out, {true, false});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message,
            "`out/config.json` is --base-config `out/config.json`; merge never writes over its inputs");
  // A hard link elsewhere: only the identity tells.
  inputs = {File("--base-config", "cfg/config.json", "/w/cfg/config.json", "1:50")};
  plan = PlanOutput("merge", inputs, out, {true, false});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message, "`out/config.json` is --base-config `cfg/config.json`; merge never writes over its inputs");
  // A link in OUT leading to the input is refused too (the user meant the input); a link elsewhere is replaced.
  out.listing = {{"config.json", EntryKind::kSymlink, "1:77", "1:50"}};
  EXPECT_FALSE(PlanOutput("merge", inputs, out, {true, false}).ok());
  out.listing = {{"config.json", EntryKind::kSymlink, "1:77", "1:78"}};
  plan = PlanOutput("merge", inputs, out, {true, false});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->replace, std::vector<std::string>{"config.json"});
}

TEST(OutputPolicy, ANonEmptyDirectoryNeedsForceAndListsWhatIsThere) {
  auto out = Out("out", "/w/out",
                 {{"notes.txt", EntryKind::kFile, "1:3"}, {"adapter_model.safetensors", EntryKind::kFile, "1:2"}}, kPeft);
  auto plan = PlanOutput("translate", Rob(), out, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message,
            "OUT_DIR `out` is not empty (adapter_model.safetensors, notes.txt); pass --force to replace the model "
            "files in it (other files are kept)");
}

TEST(OutputPolicy, ForceReplacesTheOutputsAndRemovesOnlyStaleModelFiles) {
  auto out = Out("out", "/w/out",
                 {{"model-00001-of-00002.safetensors", EntryKind::kFile, "1:20"},
                  {"model-00002-of-00002.safetensors", EntryKind::kSymlink, "1:21"},
                  {"model.safetensors.index.json", EntryKind::kFile, "1:22"},
                  {"adapter_config.json", EntryKind::kFile, "1:23"},
                  {"README.md", EntryKind::kFile, "1:24"},
                  {"config.json", EntryKind::kFile, "1:25"},
                  {"old.safetensors", EntryKind::kDirectory, "1:26"},
                  {".safetensors", EntryKind::kFile, "1:27"}},
                 {"model.safetensors", "config.json"});
  auto plan = PlanOutput("merge", {}, out, {true, false});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->commit, (std::vector<std::string>{"model.safetensors", "config.json"}));
  EXPECT_EQ(plan->replace, std::vector<std::string>{"config.json"});
  EXPECT_EQ(plan->remove, (std::vector<std::string>{"adapter_config.json", "model-00001-of-00002.safetensors",
                                                    "model-00002-of-00002.safetensors", "model.safetensors.index.json"}));
}

TEST(OutputPolicy, ForceNeverRemovesAnInput) {
  // A stale shard in OUT that is a hard link of the base's shard.
  std::vector<InputFact> inputs = {File("--base", "base/model.safetensors", "/w/base/model.safetensors", "1:40")};
  auto out = Out("out", "/w/out", {{"model-00001-of-00002.safetensors", EntryKind::kFile, "1:40"}}, {"model.safetensors"});
  auto plan = PlanOutput("merge", inputs, out, {true, false});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message, "--force would remove `out/model-00001-of-00002.safetensors`, which is --base "
                                  "`base/model.safetensors`; merge never writes over its inputs");
}

TEST(OutputPolicy, ADirectoryInTheWayIsRefusedBeforeAnythingIsWritten) {
  auto out = Out("out", "/w/out", {{"config.json", EntryKind::kDirectory, "1:5"}, {"x", EntryKind::kOther, "1:6"}},
                 {"model.safetensors", "config.json", "x"});
  for (bool force : {false, true}) {
    auto plan = PlanOutput("merge", {}, out, {force, false});
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.error().message,
              "merge cannot replace what is in the way of its output files:\n  out/config.json is a directory\n"
              "  out/x is not a regular file");
  }
}

TEST(OutputPolicy, LinksLeavingTheirInputDirectoryAreRefusedUnlessFollowLinks) {
  std::vector<InputFact> inputs = {
      Dir("--base", "base", "/w/base"),
      File("--base", "base/model-00001.safetensors", "/w/base/model-00001.safetensors", "1:1", "/w/base", "base"),
      File("--base", "base/model-00002.safetensors", "/elsewhere/secret.safetensors", "1:2", "/w/base", "base"),
      File("--base", "base/config.json", "/w/base/sub/config.json", "1:3", "/w/base", "base"),  // stays inside
      File("--base-config", "/etc/cfg.json", "/etc/real.json", "1:4"),                          // named directly
  };
  Status s = CheckInputLinks("merge", inputs, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "merge: 1 input file(s) are links leading outside their directory; pass --follow-links to read them "
            "anyway:\n  base/model-00002.safetensors -> /elsewhere/secret.safetensors (outside base)");
  EXPECT_TRUE(CheckInputLinks("merge", inputs, {false, true}).ok());
  auto plan = PlanOutput("merge", inputs, Out("out", "/w/out", {}, {"model.safetensors"}), {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message, s.error().message);
}

TEST(OutputPolicy, ConvertMayReplaceAFileButNeverIn) {
  OutputRequest out;
  out.label = "OUT";
  out.path = "b.safetensors";
  out.real = "/w";
  out.exists = true;
  out.single_file = true;
  out.writes = {"b.safetensors"};
  out.listing = {{"b.safetensors", EntryKind::kFile, "1:9"}};
  std::vector<InputFact> in = {File("IN", "a.safetensors", "/w/a.safetensors", "1:8")};
  auto plan = PlanOutput("convert", in, out, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->replace, std::vector<std::string>{"b.safetensors"});
  out.listing[0].id = "1:8";  // OUT is a hard link of IN
  plan = PlanOutput("convert", in, out, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message, "OUT `b.safetensors` is IN `a.safetensors`; convert never writes over its inputs");
}

TEST(OutputPolicy, ModelFiles) {
  EXPECT_TRUE(IsModelFile("model-00001-of-00003.safetensors"));
  EXPECT_TRUE(IsModelFile("adapter_model.safetensors"));
  EXPECT_TRUE(IsModelFile("model.safetensors.index.json"));
  EXPECT_TRUE(IsModelFile("adapter_config.json"));
  EXPECT_FALSE(IsModelFile(".safetensors"));
  EXPECT_FALSE(IsModelFile("config.json"));
  EXPECT_FALSE(IsModelFile("tokenizer.json"));
  EXPECT_FALSE(IsModelFile("model.safetensors.tmp-abc123"));
}

TEST(DroppedTensors, RefusedListingEveryOneUnlessAllowPartial) {
  std::vector<DroppedTensor> dropped = {{"base_model.model.score.weight", "kohya has no place for modules_to_save"},
                                        {"x.lora_C", "unknown role"}};
  auto r = CheckDropped("translate", dropped, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::UnresolvedTensor);
  EXPECT_EQ(r.error().message,
            "translate would drop 2 tensor(s); pass --allow-partial to write the rest anyway:\n"
            "  base_model.model.score.weight: kohya has no place for modules_to_save\n  x.lora_C: unknown role");
  auto warned = CheckDropped("translate", dropped, true);
  ASSERT_TRUE(warned.ok());
  EXPECT_EQ(warned.value(),
            "warning: dropped base_model.model.score.weight: kohya has no place for modules_to_save\n"
            "warning: dropped x.lora_C: unknown role\n");
  auto none = CheckDropped("merge", {}, false);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), "");
}

TEST(OutputPolicyJson, TheNpmCliRequestGivesTheSameDecisions) {
  auto plan = PlanOutputJson(R"({"command":"translate","inputs":[{"label":"IN_DIR","path":"rob","real":"/w/rob",
      "entry":"/w/rob","id":"1:1","directory":true,"within":null,"withinPath":""}],
      "out":{"label":"OUT_DIR","path":"out","real":"/w/out","exists":true,"singleFile":false,
      "listing":[{"name":"old.safetensors","kind":"file","id":"1:2"},{"name":"keep.txt","kind":"file","id":"1:3"}],
      "writes":["adapter_model.safetensors"]},"force":true,"followLinks":false})");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan.value(), R"({"commit":["adapter_model.safetensors"],"remove":["old.safetensors"],"replace":[]})");
  auto refused = PlanOutputJson(R"({"command":"translate","inputs":[{"label":"IN_DIR","path":"rob","real":"/w/rob",
      "entry":"/w/rob","id":"1:1","directory":true}],"out":{"label":"OUT_DIR","path":"rob/","real":"/w/rob",
      "exists":true,"listing":[],"writes":[]}})");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "OUT_DIR `rob/` is the input directory IN_DIR `rob`; translate never writes over its inputs");
  auto links = PlanOutputJson(R"({"command":"merge","inputs":[{"label":"--base","path":"b/m.safetensors",
      "real":"/x/m.safetensors","within":"/w/b","withinPath":"b"}],"out":null})");
  ASSERT_FALSE(links.ok());
  auto dropped = CheckDroppedJson(R"({"command":"merge","allowPartial":true,"dropped":[{"tensor":"t","reason":"r"}]})");
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped.value(), "warning: dropped t: r\n");
  EXPECT_FALSE(PlanOutputJson("[1]").ok());
}

}  // namespace
}  // namespace pb::app
