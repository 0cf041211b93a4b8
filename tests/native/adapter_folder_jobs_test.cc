// `create` and `extract` as jobs (app/create_job.h, app/extract_adapter_job.h) through a tiny in-memory executor:
// the steps a runtime sees in their order (the plan told, the reads of the models' shards, the weights' writes at
// their offsets, the config, done), the bytes against the core run directly, --dry-run, -q, --json, and sticky
// errors.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "app/create_job.h"
#include "app/create_report.h"
#include "app/extract_adapter_job.h"
#include "app/extract_report.h"
#include "compose/create_writer.h"
#include "compose/extract_job.h"
#include "core/writer.h"
#include "test_util.h"

namespace pb::testing {
namespace {

class VectorSink : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> bytes) override {
    data.insert(data.end(), bytes.begin(), bytes.end());
    return Status::Ok();
  }
  Bytes data;
};

// A checkpoint of F32 tensors whose values come from `value(name, i)`.
template <typename Value>
Bytes MakeModel(const std::vector<TensorSpec>& specs, Value value) {
  auto plan = PlanWrite(specs, std::nullopt, TensorOrder::kInput);
  EXPECT_TRUE(plan.ok());
  VectorSink sink;
  StreamingWriter writer(plan.value(), sink);
  EXPECT_TRUE(writer.Begin().ok());
  for (const auto& planned : writer.plan().tensors) {
    const auto& spec = specs[planned.input_index];
    uint64_t n = 1;
    for (auto d : spec.shape) n *= d;
    Bytes bytes(n * 4);
    for (uint64_t i = 0; i < n; ++i) {
      const float v = value(spec.name, i);
      std::memcpy(&bytes[4 * i], &v, 4);
    }
    EXPECT_TRUE(writer.Write(bytes).ok());
  }
  EXPECT_TRUE(writer.Finish().ok());
  return sink.data;
}

std::vector<TensorSpec> Specs() {
  std::vector<TensorSpec> specs = {{"model.embed_tokens.weight", Dtype::F32, {16, 8}},
                                   {"model.norm.weight", Dtype::F32, {8}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "self_attn.q_proj.weight", Dtype::F32, {8, 8}});
    specs.push_back({p + "mlp.down_proj.weight", Dtype::F32, {8, 12}});
  }
  return specs;
}

float BaseValue(const std::string& name, uint64_t i) { return float(int((i * 7 + name.size() * 3) % 11) - 5) * 0.125f; }
// The tuned model: a rank-1 change on every q_proj, a changed norm.
float TunedValue(const std::string& name, uint64_t i) {
  float v = BaseValue(name, i);
  if (name.find("q_proj") != std::string::npos) v += float(int(i / 8) - 3) * float(int(i % 8) - 4) * 0.03125f;
  if (name == "model.norm.weight") v += 0.5f;
  return v;
}

const std::string kConfig = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})";

struct Write {
  size_t output;
  uint64_t at, size;
};

struct JobRun {
  std::vector<job::StepKind> kinds;
  std::vector<std::string> messages;
  std::vector<Write> writes;
  std::vector<std::pair<size_t, uint64_t>> reads;  // input, begin
  std::vector<job::Step> progress;
  std::map<size_t, Bytes> outputs;
  std::optional<Error> error;
};

// Serves reads from `inputs`, at most `piece` bytes per Supply; writes into `outputs` at their offsets.
JobRun Execute(job::Job& job, const std::vector<const Bytes*>& inputs, size_t piece) {
  JobRun run;
  for (int guard = 0; guard < 100'000; ++guard) {
    auto step = job.Next();
    if (!step.ok()) {
      run.error = step.error();
      return run;
    }
    run.kinds.push_back(step->kind);
    switch (step->kind) {
      case job::StepKind::kReadHeader:
      case job::StepKind::kRead: {
        EXPECT_LT(step->input, inputs.size());
        const Bytes& in = *inputs.at(step->input);
        EXPECT_LE(step->end, in.size());
        run.reads.push_back({step->input, step->begin});
        const size_t n = static_cast<size_t>(std::min<uint64_t>(piece, step->end - step->begin));
        EXPECT_TRUE(job.Supply(std::span(in.data() + step->begin, n)).ok());
        break;
      }
      case job::StepKind::kWrite: {
        run.writes.push_back({step->output, step->at, step->bytes.size()});
        Bytes& out = run.outputs[step->output];
        if (out.size() < step->at + step->bytes.size()) out.resize(step->at + step->bytes.size());
        std::memcpy(out.data() + step->at, step->bytes.data(), step->bytes.size());
        break;
      }
      case job::StepKind::kMessage: run.messages.emplace_back(step->text); break;
      case job::StepKind::kProgress: run.progress.push_back(step.value()); break;
      case job::StepKind::kForward: ADD_FAILURE() << "no forward in an adapter folder job"; break;
      case job::StepKind::kDone: return run;
    }
  }
  ADD_FAILURE() << "the job did not end";
  return run;
}

app::AdapterFolderOptions Folder(bool json = false, bool quiet = false, bool dry_run = false) {
  app::AdapterFolderOptions folder;
  folder.json = json;
  folder.quiet = quiet;
  folder.dry_run = dry_run;
  return folder;
}

struct CreateCase {
  Bytes base = MakeModel(Specs(), BaseValue);
  Header header = ParseWholeFile(base).value();
  app::CreateJobOptions Options(app::AdapterFolderOptions folder, bool dora = true) const {
    compose::CreateArguments args;
    args.target_modules = "q_proj,down_proj";
    args.seed = "3";
    args.dora = dora;
    return {.create = compose::ParseCreateArguments(args).value(),
            .shards = {{"model.safetensors", &header}},
            .base_config = kConfig,
            .folder = std::move(folder)};
  }
};

// The core run directly: the magnitude pass over the DoRA ranges, then the emitter.
Bytes CreateDirectly(const CreateCase& c, const compose::CreatePlan& plan) {
  compose::MagnitudePass pass(plan);
  for (const auto& r : pass.ranges()) EXPECT_TRUE(pass.Push(std::span(c.base.data() + r.begin, r.end - r.begin)).ok());
  VectorSink sink;
  compose::AdapterEmitter emitter(plan, pass.TakeNorms(), sink);
  EXPECT_TRUE(emitter.Begin().ok());
  EXPECT_TRUE(emitter.Finish().ok());
  return sink.data;
}

TEST(CreateJob, TellsThePlanReadsTheDoraWeightsThenWritesTheWeightsAndTheConfig) {
  CreateCase c;
  app::CreateJob job(c.Options(Folder()));
  JobRun run = Execute(job, {&c.base}, 13);
  ASSERT_FALSE(run.error) << run.error->message;
  const compose::CreatePlan& plan = *job.plan();
  // The output folder opened (an empty write) before the plan is told.
  ASSERT_GE(run.kinds.size(), 2u);
  EXPECT_EQ(run.kinds[0], job::StepKind::kWrite);
  EXPECT_EQ(run.kinds[1], job::StepKind::kMessage);
  EXPECT_EQ(run.writes.front().size, 0u);
  EXPECT_EQ(run.messages, std::vector<std::string>{app::RenderCreatePlanText(plan, false)});
  // The DoRA weights' bytes read through, in pieces, before anything is written; progress counts them.
  compose::MagnitudePass pass(plan);
  ASSERT_GT(pass.total_bytes(), 0u);
  ASSERT_FALSE(run.reads.empty());
  for (const auto& [input, begin] : run.reads) EXPECT_EQ(input, 0u);
  ASSERT_FALSE(run.progress.empty());
  EXPECT_EQ(run.progress.front().done, 0u);  // the shard's line starts before its first bytes
  EXPECT_EQ(run.progress.back().done, pass.total_bytes());
  EXPECT_EQ(run.progress.back().total, pass.total_bytes());
  // The weights in order of offset, each write where the last ended, then the config whole.
  ASSERT_GE(run.writes.size(), 3u);
  uint64_t at = 0;
  for (size_t i = 0; i + 1 < run.writes.size(); ++i) {
    EXPECT_EQ(run.writes[i].output, app::kAdapterWeightsOutput);
    EXPECT_EQ(run.writes[i].at, at);
    at += run.writes[i].size;
  }
  EXPECT_EQ(run.writes.back().output, app::kAdapterConfigOutput);
  EXPECT_EQ(run.kinds.back(), job::StepKind::kDone);
  EXPECT_EQ(run.outputs[0], CreateDirectly(c, plan));
  EXPECT_EQ(std::string(run.outputs[1].begin(), run.outputs[1].end()), plan.config_text);
  EXPECT_EQ(job.summary(), app::RenderCreateOutcomeText(plan));
  EXPECT_EQ(job.Next().value().kind, job::StepKind::kDone);
}

TEST(CreateJob, WithoutDoraNothingIsRead) {
  CreateCase c;
  app::CreateJob job(c.Options(Folder(), false));
  JobRun run = Execute(job, {&c.base}, 1 << 20);
  ASSERT_FALSE(run.error) << run.error->message;
  EXPECT_TRUE(run.reads.empty());
  EXPECT_TRUE(run.progress.empty());
  EXPECT_EQ(run.outputs[0], CreateDirectly(c, *job.plan()));
}

TEST(CreateJob, DryRunJsonAndQuiet) {
  CreateCase c;
  {
    app::CreateJob job(c.Options(Folder(false, false, true)));
    JobRun run = Execute(job, {&c.base}, 64);
    ASSERT_FALSE(run.error);
    EXPECT_EQ(run.kinds, std::vector<job::StepKind>{job::StepKind::kDone});
    EXPECT_EQ(job.summary(), app::RenderCreatePlanText(*job.plan(), true));
  }
  {
    app::CreateJob job(c.Options(Folder(true, false, true)));
    JobRun run = Execute(job, {&c.base}, 64);
    ASSERT_FALSE(run.error);
    EXPECT_EQ(job.summary(), app::RenderCreateJson(*job.plan(), true));
  }
  {
    app::CreateJob job(c.Options(Folder(false, true)));
    JobRun run = Execute(job, {&c.base}, 64);
    ASSERT_FALSE(run.error);
    EXPECT_TRUE(run.messages.empty());
    EXPECT_EQ(job.summary(), "");
    EXPECT_EQ(run.outputs.size(), 2u);
  }
  {
    app::CreateJob job(c.Options(Folder(true)));
    JobRun run = Execute(job, {&c.base}, 64);
    ASSERT_FALSE(run.error);
    EXPECT_TRUE(run.messages.empty());
    EXPECT_EQ(job.summary(), app::RenderCreateJson(*job.plan(), false));
  }
}

TEST(CreateJob, ErrorsAreSticky) {
  CreateCase c;
  {  // the base ends inside a DoRA weight
    app::CreateJob job(c.Options(Folder(false, true)));
    auto step = job.Next();
    while (step.ok() && step->kind != job::StepKind::kRead) step = job.Next();
    ASSERT_TRUE(step.ok());
    EXPECT_EQ(job.Supply({}).error().code, ErrorCode::IoError);
    EXPECT_EQ(job.Next().error().code, ErrorCode::IoError);
    EXPECT_EQ(job.Next().error().message, "source ended at byte " + std::to_string(step->begin) + ", inside a tensor");
  }
  {  // a supply nothing asked for
    app::CreateJob job(c.Options(Folder()));
    const uint8_t byte = 0;
    EXPECT_EQ(job.Supply(std::span(&byte, 1)).error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(job.Next().error().code, ErrorCode::InvalidArgument);
  }
  {  // a plan refused
    app::CreateJobOptions options = c.Options(Folder());
    options.create.target_names = {"nothing"};
    app::CreateJob job(std::move(options));
    const Error error = job.Next().error();
    EXPECT_EQ(error.code, ErrorCode::InvalidArgument);
    EXPECT_EQ(job.Next().error().message, error.message);
  }
}

struct ExtractCase {
  Bytes base = MakeModel(Specs(), BaseValue), tuned = MakeModel(Specs(), TunedValue);
  Header base_header = ParseWholeFile(base).value(), tuned_header = ParseWholeFile(tuned).value();
  app::ExtractJobOptions Options(app::AdapterFolderOptions folder, const Header* tuned_h = nullptr) const {
    compose::ExtractArguments args;
    args.rank = "2";
    return {.extract = compose::ParseExtractArguments(args).value(),
            .base = {{"model.safetensors", &base_header}},
            .tuned = {{"model.safetensors", tuned_h ? tuned_h : &tuned_header}},
            .base_config = kConfig,
            .tuned_config = kConfig,
            .folder = std::move(folder)};
  }
};

TEST(ExtractAdapterJob, ReadsBothModelsWritesTheDataThenTheHeaderAtZeroThenTheConfig) {
  ExtractCase c;
  app::ExtractAdapterJob job(c.Options(Folder()));
  JobRun run = Execute(job, {&c.base, &c.tuned}, 17);
  ASSERT_FALSE(run.error) << run.error->message;
  const compose::ExtractPlan& plan = *job.plan();
  ASSERT_GE(run.kinds.size(), 2u);
  EXPECT_EQ(run.kinds[0], job::StepKind::kWrite);
  EXPECT_EQ(run.kinds[1], job::StepKind::kMessage);
  EXPECT_EQ(run.messages, std::vector<std::string>{app::RenderExtractPlanText(plan, false)});
  // Both models are read: input 0 the base's shard, input 1 the tuned one's.
  std::set<size_t> read_inputs;
  for (const auto& [input, begin] : run.reads) read_inputs.insert(input);
  EXPECT_EQ(read_inputs, (std::set<size_t>{0, 1}));
  for (const auto& p : run.progress) EXPECT_EQ(p.input, job::kAllInputs);
  ASSERT_FALSE(run.progress.empty());
  EXPECT_EQ(run.progress.back().done, plan.read_bytes);
  // The data after the reserved region, in order; the header last, at 0, exactly the region; then the config.
  ASSERT_GE(run.writes.size(), 4u);
  EXPECT_EQ(run.writes.front().output, app::kAdapterWeightsOutput);  // the folder opened: an empty write
  EXPECT_EQ(run.writes.front().size, 0u);
  uint64_t at = plan.reserved_header;
  for (size_t i = 1; i + 2 < run.writes.size(); ++i) {
    EXPECT_EQ(run.writes[i].output, app::kAdapterWeightsOutput);
    EXPECT_EQ(run.writes[i].at, at);
    at += run.writes[i].size;
  }
  const Write header = run.writes[run.writes.size() - 2];
  EXPECT_EQ(header.output, app::kAdapterWeightsOutput);
  EXPECT_EQ(header.at, 0u);
  EXPECT_EQ(header.size, plan.reserved_header);
  EXPECT_EQ(run.writes.back().output, app::kAdapterConfigOutput);
  EXPECT_EQ(run.kinds.back(), job::StepKind::kDone);

  // The bytes of the core's job pushed directly.
  VectorSink sink;
  compose::ExtractJob direct(plan, sink);
  while (auto read = direct.NextRead()) {
    const Bytes& file = read->tuned ? c.tuned : c.base;
    ASSERT_TRUE(direct.Push(std::span(file.data() + read->begin, read->end - read->begin)).ok());
  }
  auto outcome = direct.Finish();
  ASSERT_TRUE(outcome.ok()) << outcome.error().message;
  Bytes expected(outcome->header.begin(), outcome->header.end());
  expected.insert(expected.end(), sink.data.begin(), sink.data.end());
  EXPECT_EQ(run.outputs[0], expected);
  EXPECT_EQ(std::string(run.outputs[1].begin(), run.outputs[1].end()), outcome->config_text);
  EXPECT_EQ(job.summary(), app::RenderExtractOutcomeText(plan, outcome.value()));
}

TEST(ExtractAdapterJob, DryRunAndJson) {
  ExtractCase c;
  {
    app::ExtractAdapterJob job(c.Options(Folder(false, false, true)));
    JobRun run = Execute(job, {&c.base, &c.tuned}, 64);
    ASSERT_FALSE(run.error);
    EXPECT_EQ(run.kinds, std::vector<job::StepKind>{job::StepKind::kDone});
    EXPECT_EQ(job.summary(), app::RenderExtractPlanText(*job.plan(), true));
  }
  {
    app::ExtractAdapterJob job(c.Options(Folder(true, false, true)));
    JobRun run = Execute(job, {&c.base, &c.tuned}, 64);
    ASSERT_FALSE(run.error);
    EXPECT_EQ(job.summary(), app::RenderExtractJson(*job.plan(), nullptr));
  }
  {
    app::ExtractAdapterJob job(c.Options(Folder(true)));
    JobRun run = Execute(job, {&c.base, &c.tuned}, 64);
    ASSERT_FALSE(run.error);
    EXPECT_TRUE(run.messages.empty());
    EXPECT_EQ(job.summary().rfind("{\"ok\":true", 0), 0u) << job.summary();
  }
}

TEST(ExtractAdapterJob, NothingChangedIsAStickyErrorAfterTheReads) {
  ExtractCase c;
  app::ExtractAdapterJob job(c.Options(Folder(false, true), &c.base_header));
  JobRun run = Execute(job, {&c.base, &c.base}, 1 << 20);
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, ErrorCode::InvalidArgument);
  EXPECT_FALSE(run.reads.empty());
  EXPECT_TRUE(run.outputs.empty() || run.outputs.count(app::kAdapterConfigOutput) == 0);
  EXPECT_EQ(job.Next().error().message, run.error->message);
}

}  // namespace
}  // namespace pb::testing
