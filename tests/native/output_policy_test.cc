// The output policy on crafted facts: aliasing, non-empty directories, --force's stale files, links leaving an
// input directory, names taken by directories, and the dropped-tensor rule.
#include <gtest/gtest.h>

#include <functional>
#include <variant>

#include "app/output_policy.h"
#include "app/output_policy_json.h"

namespace pb::app {
namespace {

InputFact Dir(const std::string& label, const std::string& path, const std::string& real) {
  return {label, path,         real, real, "1:" + std::to_string(std::hash<std::string>()(real) % 1000),
          true,  std::nullopt, ""};
}

InputFact File(const std::string& label, const std::string& path, const std::string& real, const std::string& id,
               std::optional<std::string> within = std::nullopt, const std::string& within_path = "") {
  size_t slash = real.rfind('/');
  return {label, path,  real,   real.substr(0, slash) + "/" + path.substr(path.rfind('/') + 1),
          id,    false, within, within_path};
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
  OutputRequest out =
      Out("out", "/w/out", {{"config.json", EntryKind::kFile, "1:50"}}, {"model.safetensors", "config.json"});
  out.label = "--out";
  auto plan = PlanOutput("merge", inputs, out, {true, false});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message,
            "`out/config.json` is --base-config `out/config.json`; merge never writes over its inputs");
  // A hard link elsewhere: only the identity tells.
  inputs = {File("--base-config", "cfg/config.json", "/w/cfg/config.json", "1:50")};
  plan = PlanOutput("merge", inputs, out, {true, false});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message,
            "`out/config.json` is --base-config `cfg/config.json`; merge never writes over its inputs");
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
                 {{"notes.txt", EntryKind::kFile, "1:3"}, {"adapter_model.safetensors", EntryKind::kFile, "1:2"}},
                 kPeft);
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
  EXPECT_EQ(plan->remove,
            (std::vector<std::string>{"adapter_config.json", "model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors", "model.safetensors.index.json"}));
}

TEST(OutputPolicy, ForceNeverRemovesAnInput) {
  // A stale shard in OUT that is a hard link of the base's shard.
  std::vector<InputFact> inputs = {File("--base", "base/model.safetensors", "/w/base/model.safetensors", "1:40")};
  auto out =
      Out("out", "/w/out", {{"model-00001-of-00002.safetensors", EntryKind::kFile, "1:40"}}, {"model.safetensors"});
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
  EXPECT_EQ(warned.value(), "warning: dropped base_model.model.score.weight: kohya has no place for modules_to_save\n"
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
  EXPECT_EQ(plan.value(),
            R"({"commit":["adapter_model.safetensors"],"remove":["old.safetensors"],"replace":[],"stale":[]})");
  auto refused = PlanOutputJson(R"({"command":"translate","inputs":[{"label":"IN_DIR","path":"rob","real":"/w/rob",
      "entry":"/w/rob","id":"1:1","directory":true}],"out":{"label":"OUT_DIR","path":"rob/","real":"/w/rob",
      "exists":true,"listing":[],"writes":[]}})");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "OUT_DIR `rob/` is the input directory IN_DIR `rob`; translate never writes over its inputs");
  auto links = PlanOutputJson(R"({"command":"merge","inputs":[{"label":"--base","path":"b/m.safetensors",
      "real":"/x/m.safetensors","within":"/w/b","withinPath":"b"}],"out":null})");
  ASSERT_FALSE(links.ok());
  EXPECT_FALSE(PlanOutputJson("[1]").ok());
}

CommandLine Line(std::vector<std::string> args) {
  auto parsed = ParseCommandLine(args);
  EXPECT_TRUE(std::holds_alternative<CommandLine>(parsed));
  return std::get<CommandLine>(parsed);
}

std::vector<std::string> Rendered(const std::vector<NamedInput>& named) {
  std::vector<std::string> out;
  for (const auto& n : named) out.push_back(n.label + " " + n.path);
  return out;
}

TEST(NamedInputs, EveryFlagThatNamesAnInputWhateverTheCommand) {
  EXPECT_EQ(Rendered(NamedInputs(Line({"merge", "--base", "b", "--adapter", "a", "-o", "out", "--naming-table",
                                       "t1.json", "--naming-table", "out/t2.json", "--base-config", "c.json"}))),
            (std::vector<std::string>{"--base b", "--adapter a", "--base-config c.json", "--naming-table t1.json",
                                      "--naming-table out/t2.json"}));
  EXPECT_EQ(Rendered(NamedInputs(Line({"translate", "in", "out", "--to", "mlx", "--naming-table", "t.json"}))),
            (std::vector<std::string>{"IN_DIR in", "--naming-table t.json"}));
  EXPECT_EQ(Rendered(NamedInputs(Line({"combine", "a1", "a2", "-o", "out"}))),
            (std::vector<std::string>{"ADAPTER a1", "ADAPTER a2"}));
  EXPECT_EQ(Rendered(NamedInputs(Line({"extract", "--base", "b", "--tuned", "t", "-o", "out"}))),
            (std::vector<std::string>{"--base b", "--tuned t"}));
  EXPECT_EQ(Rendered(NamedInputs(Line({"convert", "in.safetensors", "out.safetensors", "--dtype", "bf16"}))),
            (std::vector<std::string>{"IN in.safetensors"}));
  // Remote arguments have no local path to protect.
  EXPECT_EQ(Rendered(NamedInputs(Line({"merge", "--base", "hf://o/r", "--adapter", "https://x/a", "-o", "out"}))),
            (std::vector<std::string>{}));
}

TEST(OutputPolicy, ANamingTableInsideTheOutputIsNeverWrittenOverOrRemoved) {
  // --naming-table out/config.json: merge writes config.json; --naming-table out/adapter_config.json: --force
  // would remove it as a stale model file.
  std::vector<OutputEntry> listing = {{"config.json", EntryKind::kFile, "1:20"},
                                      {"adapter_config.json", EntryKind::kFile, "1:21"}};
  for (bool force : {false, true}) {
    auto written = PlanOutput("merge", {File("--naming-table", "out/config.json", "/w/out/config.json", "1:20")},
                              Out("out", "/w/out", listing, {"model.safetensors", "config.json"}), {force, false});
    ASSERT_FALSE(written.ok());
    EXPECT_EQ(written.error().message,
              "`out/config.json` is --naming-table `out/config.json`; merge never writes over its inputs");
  }
  auto removed = PlanOutput("merge",
                            {File("--naming-table", "out/adapter_config.json", "/w/out/adapter_config.json", "1:21")},
                            Out("out", "/w/out", listing, {"model.safetensors"}), {true, false});
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(
      removed.error().message,
      "--force would remove `out/adapter_config.json`, which is --naming-table `out/adapter_config.json`; merge never "
      "writes over its inputs");
}

TEST(OutputPolicy, OurOwnTemporariesAreStaleAndDoNotMakeTheDirectoryNonEmpty) {
  EXPECT_TRUE(IsOwnTemporary("model-00001-of-00002.safetensors.tmp-Ab3xZ9"));
  EXPECT_TRUE(IsOwnTemporary("config.json.old-a_b-C1"));
  EXPECT_TRUE(IsOwnTemporary(".peft-bridge-commit.tmp-000000"));
  EXPECT_FALSE(IsOwnTemporary(".tmp-Ab3xZ9"));           // no name before it
  EXPECT_FALSE(IsOwnTemporary("notes.tmp-1"));           // not six letters
  EXPECT_FALSE(IsOwnTemporary("notes.tmp-Ab3xZ9.txt"));  // not at the end
  EXPECT_FALSE(IsOwnTemporary("model.safetensors.tmp-Ab3x.9"));
  EXPECT_FALSE(IsOwnTemporary("model.safetensors"));
  std::vector<OutputEntry> listing = {{"model.safetensors.tmp-Ab3xZ9", EntryKind::kFile, "1:30"},
                                      {"config.json.old-a_b-C1", EntryKind::kFile, "1:31"},
                                      {"dir.tmp-Ab3xZ9", EntryKind::kDirectory, "1:32"}};
  // Without --force: only a directory that looks like one is content.
  auto plan = PlanOutput("translate", Rob(), Out("out", "/w/out", {listing[0], listing[1]}, kPeft), {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->stale, (std::vector<std::string>{"config.json.old-a_b-C1", "model.safetensors.tmp-Ab3xZ9"}));
  EXPECT_TRUE(plan->remove.empty());
  auto refused = PlanOutput("translate", Rob(), Out("out", "/w/out", listing, kPeft), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("is not empty (dir.tmp-Ab3xZ9)"), std::string::npos)
      << refused.error().message;
  // An input is never stale, whatever its name.
  auto input =
      PlanOutput("translate", {File("--naming-table", "out/t.json.tmp-Ab3xZ9", "/w/out/t.json.tmp-Ab3xZ9", "1:33")},
                 Out("out", "/w/out", {{"t.json.tmp-Ab3xZ9", EntryKind::kFile, "1:33"}}, kPeft), {true, false});
  ASSERT_TRUE(input.ok()) << input.error().message;
  EXPECT_TRUE(input->stale.empty());
}

TEST(CommitJournal, RoundTripsAndRefusesWhatWeNeverWrite) {
  CommitJournal j;
  j.renames = {{"model.safetensors.tmp-Ab3xZ9", "model.safetensors"}, {"config.json.tmp-000000", "config.json"}};
  j.remove = {"model-00002-of-00002.safetensors"};
  j.asides = {"model.safetensors.old-zzzzzz"};
  const std::string text = RenderCommitJournal(j);
  EXPECT_EQ(text, "peft-bridge commit journal 1\nrename model.safetensors.tmp-Ab3xZ9\tmodel.safetensors\n"
                  "rename config.json.tmp-000000\tconfig.json\nremove model-00002-of-00002.safetensors\n"
                  "aside model.safetensors.old-zzzzzz\n");
  auto parsed = ParseCommitJournal(text, "out/.peft-bridge-commit");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(RenderCommitJournal(parsed.value()), text);
  for (const std::string bad :
       {std::string("peft-bridge commit journal 2\n"), text.substr(0, text.size() - 1),      // cut short
        std::string("peft-bridge commit journal 1\nrename ../x.tmp-Ab3xZ9\tconfig.json\n"),  // leaves the directory
        std::string("peft-bridge commit journal 1\nrename notes.txt\tconfig.json\n"),        // not our temporary
        std::string("peft-bridge commit journal 1\nremove tokenizer.json\n"),                // not a model file
        std::string("peft-bridge commit journal 1\naside /etc/passwd\n"),
        std::string("peft-bridge commit journal 1\nunlink x\n")}) {
    auto r = ParseCommitJournal(bad, "out/.peft-bridge-commit");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(r.error().message.rfind("`out/.peft-bridge-commit` is not a commit journal peft-bridge wrote (", 0), 0u);
  }
}

TEST(CommitJournal, AFileLargerThanAnyJournalWeWriteIsRefusedByItsSize) {
  EXPECT_TRUE(CheckCommitJournalSize(kMaxCommitJournalBytes, "out/.peft-bridge-commit").ok());
  const auto status = CheckCommitJournalSize(uint64_t{1} << 40, "out/.peft-bridge-commit");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(
      status.error().message,
      "`out/.peft-bridge-commit` is not a commit journal peft-bridge wrote (it is 1099511627776 bytes; a journal is "
      "at most 16777216); remove it once you have checked the directory");
  // The parser applies the same bound to text it is given: a valid journal padded past it.
  std::string text = "peft-bridge commit journal 1\n";
  text.resize(kMaxCommitJournalBytes + 1, '\n');
  auto parsed = ParseCommitJournal(text, "out/.peft-bridge-commit");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("(it is 16777217 bytes; a journal is at most 16777216)"), std::string::npos);
}

}  // namespace
}  // namespace pb::app
