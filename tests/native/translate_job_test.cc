// translate and adapter-info as jobs (app/translate_job.h): the steps a runtime sees, the bytes they write against
// the core's translate of the whole file, partial supplies, the output policy, and sticky errors.
#include <gtest/gtest.h>

#include <map>

#include "adapter/adapter_report.h"
#include "adapter/translate.h"
#include "adapter_fixtures.h"
#include "app/translate_job.h"

namespace pb::testing {
namespace {

using adapter::AdapterFormat;
using job::StepKind;

GeneratedAdapter SmallAdapter() {
  std::vector<GenTensor> t;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    AddLinear(t, p + "q_proj", 4, 32, 32);
    AddLinear(t, p + "v_proj", 4, 32, 16);
  }
  GeneratedAdapter g;
  g.config = PeftConfig(R"("r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"])");
  g.weights = BuildSafetensors(t, 11);
  g.base_config = LlamaConfigJson();
  return g;
}

app::TranslateOptions Options(const GeneratedAdapter& g, AdapterFormat to) {
  app::TranslateOptions o;
  o.to = to;
  o.weights_name = "adapter_model.safetensors";
  o.weights_size = g.weights.size();
  o.config_size = g.config.size();
  o.base_config_size = g.base_config->size();
  return o;
}

struct JobRun {
  std::map<size_t, Bytes> outputs;
  std::vector<StepKind> kinds;
  std::vector<size_t> inputs;  // per step: the input a read step reads
  std::vector<std::string> messages, warnings;
  std::optional<Error> error;
  uint64_t last_done = 0;
};

// An in-memory executor supplying at most `piece` bytes per Supply; checks that each output is written in order of
// offset and that progress only grows.
JobRun Execute(job::Job& job, const GeneratedAdapter& g, const Bytes& weights, size_t piece) {
  const Bytes config(g.config.begin(), g.config.end()), base(g.base_config->begin(), g.base_config->end());
  const Bytes* inputs[] = {&weights, &config, &base};
  JobRun run;
  for (int guard = 0; guard < 1'000'000; ++guard) {
    auto step = job.Next();
    if (!step.ok()) {
      run.error = step.error();
      return run;
    }
    run.kinds.push_back(step->kind);
    run.inputs.push_back(step->input);
    switch (step->kind) {
      case StepKind::kReadHeader:
      case StepKind::kRead: {
        EXPECT_LT(step->input, 3u);
        EXPECT_LT(step->begin, step->end);
        const Bytes& in = *inputs[std::min<size_t>(step->input, 2)];
        const uint64_t end = std::min<uint64_t>({step->end, step->begin + piece, in.size()});
        const size_t n = step->begin < end ? end - step->begin : 0;
        if (Status s = job.Supply(std::span(in.data() + step->begin, n)); !s.ok()) {
          run.error = s.error();
          return run;
        }
        break;
      }
      case StepKind::kWrite: {
        Bytes& out = run.outputs[step->output];
        EXPECT_EQ(step->at, out.size()) << "output " << step->output << " written out of order";
        out.insert(out.end(), step->bytes.begin(), step->bytes.end());
        break;
      }
      case StepKind::kMessage: (step->warning ? run.warnings : run.messages).emplace_back(step->text); break;
      case StepKind::kProgress:
        EXPECT_GE(step->done, run.last_done);
        EXPECT_EQ(step->total, weights.size());
        run.last_done = step->done;
        break;
      case StepKind::kForward: ADD_FAILURE() << "translate forwards nothing"; break;
      case StepKind::kDone: return run;
    }
  }
  ADD_FAILURE() << "the job did not end";
  return run;
}

// The core's translate of the whole file in memory: the files the job must write, and the texts it must tell.
adapter::TranslateResult Expected(const GeneratedAdapter& g, AdapterFormat to) {
  auto result = adapter::Translate(g.source(), to, {}, {});
  EXPECT_TRUE(result.ok()) << result.error().message;
  return std::move(result.value());
}

Bytes WholeWeights(const adapter::AdapterOutput& output) {
  VectorSink sink;
  EXPECT_TRUE(adapter::EmitSafetensors(output.weights, sink).ok());
  return sink.bytes;
}

TEST(TranslateJob, ReadsTheHeaderTellsThePlanAndWritesBothFilesInOrder) {
  const GeneratedAdapter g = SmallAdapter();
  const adapter::TranslateResult expected = Expected(g, AdapterFormat::kMlx);
  for (size_t piece : {size_t{1} << 30, size_t{7}}) {
    app::TranslateJob job(Options(g, AdapterFormat::kMlx));
    JobRun run = Execute(job, g, g.weights, piece);
    ASSERT_FALSE(run.error) << run.error->message;
    // The configs (inputs 1 and 2) whole, then the header (the length, then the JSON), then the plan, the weights
    // (each tensor read as it is written) and the config, then done.
    ASSERT_GE(run.kinds.size(), 6u);
    EXPECT_EQ(run.kinds[0], StepKind::kRead);
    EXPECT_EQ(run.inputs[0], 1u);
    EXPECT_EQ(run.kinds.back(), StepKind::kDone);
    const auto first = [&](StepKind k, size_t input) {
      for (size_t i = 0; i < run.kinds.size(); ++i)
        if (run.kinds[i] == k && (k != StepKind::kRead || run.inputs[i] == input)) return i;
      return run.kinds.size();
    };
    EXPECT_LT(first(StepKind::kRead, 2), first(StepKind::kReadHeader, 0));
    EXPECT_LT(first(StepKind::kReadHeader, 0), first(StepKind::kMessage, 0));
    EXPECT_LT(first(StepKind::kMessage, 0), first(StepKind::kRead, 0));
    EXPECT_LT(first(StepKind::kMessage, 0), first(StepKind::kWrite, 0));
    EXPECT_LT(first(StepKind::kRead, 0), run.kinds.size());
    ASSERT_EQ(run.messages.size(), 1u);
    EXPECT_EQ(run.messages[0], adapter::RenderTranslatePlanText(expected, AdapterFormat::kMlx));
    EXPECT_TRUE(run.warnings.empty());
    EXPECT_EQ(run.outputs[0], WholeWeights(expected.output));
    const std::string config(run.outputs[1].begin(), run.outputs[1].end());
    EXPECT_EQ(config, expected.output.config_text);
    EXPECT_EQ(job.output_names(), (std::vector<std::string>{"adapters.safetensors", "adapter_config.json"}));
    EXPECT_EQ(job.summary(), adapter::RenderTranslateOutcomeText(expected));
    EXPECT_GT(run.last_done, 0u);
  }
}

TEST(TranslateJob, DryRunAndJsonWriteNothingAndSummarise) {
  const GeneratedAdapter g = SmallAdapter();
  const adapter::TranslateResult expected = Expected(g, AdapterFormat::kPeft);
  app::TranslateOptions o = Options(g, AdapterFormat::kPeft);
  o.dry_run = true;
  o.json = true;
  app::TranslateJob job(std::move(o));
  JobRun run = Execute(job, g, g.weights, 64);
  ASSERT_FALSE(run.error) << run.error->message;
  EXPECT_TRUE(run.outputs.empty());
  EXPECT_TRUE(run.messages.empty());  // --json: the plan is not told
  EXPECT_EQ(job.summary(), adapter::RenderTranslateJson(expected, AdapterFormat::kPeft, true));
}

TEST(TranslateJob, AdapterInfoReadsEachModuleAndWritesNothing) {
  const GeneratedAdapter g = SmallAdapter();
  app::TranslateOptions o = Options(g, AdapterFormat::kPeft);
  o.info = true;
  app::TranslateJob job(std::move(o));
  JobRun run = Execute(job, g, g.weights, 5);
  ASSERT_FALSE(run.error) << run.error->message;
  EXPECT_TRUE(run.outputs.empty());
  EXPECT_TRUE(run.messages.empty());
  EXPECT_NE(std::find(run.kinds.begin(), run.kinds.end(), StepKind::kRead), run.kinds.end());  // the ‖ΔW‖ pass
  auto read = adapter::ReadAdapter(g.source(), {});
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(job.summary(), adapter::RenderAdapterInfoText(read.value()));
}

TEST(TranslateJob, AHeaderErrorNamesTheWeightsFileAndIsSticky) {
  GeneratedAdapter g = SmallAdapter();
  g.weights[0] = 0xff;  // a header length far past the file's end
  g.weights[5] = 0x7f;
  app::TranslateJob job(Options(g, AdapterFormat::kPeft));
  JobRun run = Execute(job, g, g.weights, 1 << 20);
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->message.rfind("adapter_model.safetensors: ", 0), 0u) << run.error->message;
  EXPECT_FALSE(job.adapter_read());
  auto again = job.Next();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().message, run.error->message);
  EXPECT_FALSE(job.Supply(std::span<const uint8_t>()).ok());
}

TEST(TranslateJob, OverSupplyAndAnEndedFileAreErrors) {
  const GeneratedAdapter g = SmallAdapter();
  app::TranslateJob job(Options(g, AdapterFormat::kPeft));
  auto step = job.Next();
  ASSERT_TRUE(step.ok());
  ASSERT_EQ(step->kind, StepKind::kRead);  // the adapter's config, whole
  EXPECT_EQ(step->input, 1u);
  EXPECT_EQ(step->end - step->begin, g.config.size());
  const Bytes more(step->end - step->begin + 1, 0);
  Status over = job.Supply(more);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::InvalidArgument);
  EXPECT_FALSE(job.Next().ok());

  app::TranslateJob cut(Options(g, AdapterFormat::kPeft));
  JobRun run = Execute(cut, g, Bytes(g.weights.begin(), g.weights.begin() + 20), 1 << 20);
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, ErrorCode::IoError);
  EXPECT_NE(run.error->message.find("ended before byte 21"), std::string::npos) << run.error->message;
}

TEST(TranslateJob, TheOutputPolicyRefusesBeforeAnyWrite) {
  const GeneratedAdapter g = SmallAdapter();
  app::TranslateOptions o = Options(g, AdapterFormat::kPeft);
  app::OutputRequest out;
  out.path = out.real = "/out";
  out.exists = true;
  out.listing = {{"other.txt", app::EntryKind::kFile, "1:2", ""}};  // not empty, no --force
  out.writes = {"adapter_model.safetensors", "adapter_config.json"};
  o.output = app::TranslateOptions::OutputCheck{{}, out, {}};
  app::TranslateJob job(std::move(o));
  JobRun run = Execute(job, g, g.weights, 1 << 20);
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, ErrorCode::InvalidArgument);
  EXPECT_TRUE(run.outputs.empty());
  EXPECT_TRUE(run.messages.empty());
  EXPECT_TRUE(job.adapter_read());
}

}  // namespace
}  // namespace pb::testing
