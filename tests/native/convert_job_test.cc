// The job protocol (job/job.h) as convert speaks it (app/convert_job.h): the steps a runtime sees, the bytes they
// produce against the core's converter, partial supplies, streams of unknown size, and errors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "app/convert_job.h"
#include "convert/convert_stream.h"
#include "test_util.h"

namespace pb::testing {
namespace {

// A file with convertible floats (converted), a tensor already in the target dtype and integers (forwarded).
Bytes MixedFile(size_t f32_count = 1001) {
  std::mt19937 rng(5);
  const std::vector<std::pair<std::string, std::pair<std::string, size_t>>> tensors = {
      {"z.f32", {"F32", f32_count}}, {"a.bf16", {"BF16", 513}}, {"m.f16", {"F16", 255}},
      {"ids", {"I64", 5}},           {"empty", {"F32", 0}},     {"e4m3", {"F8_E4M3", 129}}};
  std::string json = R"({"__metadata__":{"format":"pt"})";
  Bytes data;
  for (const auto& [name, spec] : tensors) {
    const size_t bytes = spec.second * DtypeBits(*ParseDtype(spec.first)) / 8;
    json += ",\"" + name + R"(":{"dtype":")" + spec.first + R"(","shape":[)" + std::to_string(spec.second) +
            R"(],"data_offsets":[)" + std::to_string(data.size()) + "," + std::to_string(data.size() + bytes) + "]}";
    for (size_t i = 0; i < bytes; ++i) data.push_back(static_cast<uint8_t>(rng()));
    if (spec.first == "F32")
      for (size_t i = 0; i < spec.second; ++i) {
        const float f = static_cast<float>(static_cast<int>(rng() % 20001) - 10000) / 97.0f;
        std::memcpy(&data[data.size() - bytes + 4 * i], &f, 4);
      }
  }
  return MakeFile(json + "}", data);
}

// The core's converter, fed every planned tensor's source range: the bytes the job must produce.
Bytes Expected(const Bytes& file, Dtype target, TensorOrder order) {
  auto header = ParseWholeFile(file);
  EXPECT_TRUE(header.ok());
  auto plan = PlanConversion(header.value(), target, order);
  EXPECT_TRUE(plan.ok());
  VectorSink sink;
  TensorBytesConverter conv(std::move(plan.value()), sink);
  EXPECT_TRUE(conv.Begin().ok());
  for (size_t src : conv.plan().source_tensor) {
    TensorInfo t = header->tensor(src);
    EXPECT_TRUE(conv.Push(std::span(file.data() + header->data_start() + t.begin, t.end - t.begin)).ok());
  }
  EXPECT_TRUE(conv.Finish().ok());
  return sink.bytes;
}

struct JobRun {
  Bytes out;
  std::vector<job::StepKind> kinds;
  std::vector<std::string> messages;
  uint64_t forwarded = 0;
  uint64_t last_done = 0, last_total = 0;
  std::optional<Error> error;
};

// An in-memory executor: supplies at most `piece` bytes per Supply, and serves reads from `source` (which may
// end early or run past the header's end); checks that reads and writes go forward when `sequential`.
JobRun Execute(job::Job& job, const Bytes& source, size_t piece, bool sequential) {
  JobRun run;
  uint64_t read_pos = 0;
  for (int guard = 0; guard < 1'000'000; ++guard) {
    auto step = job.Next();
    if (!step.ok()) {
      run.error = step.error();
      return run;
    }
    run.kinds.push_back(step->kind);
    switch (step->kind) {
      case job::StepKind::kReadHeader:
      case job::StepKind::kRead: {
        EXPECT_LT(step->begin, step->end);
        if (sequential) EXPECT_EQ(step->begin, read_pos);
        const uint64_t want = std::min<uint64_t>(piece, step->end - step->begin);
        const uint64_t end = std::min<uint64_t>(step->begin + want, source.size());
        const size_t n = step->begin < end ? size_t(end - step->begin) : 0;
        read_pos = step->begin + n;
        if (Status s = job.Supply(std::span(source.data() + step->begin, n)); !s.ok()) {
          run.error = s.error();
          return run;
        }
        break;
      }
      case job::StepKind::kForward:
        if (sequential) EXPECT_EQ(step->begin, read_pos);
        read_pos = step->end;
        EXPECT_EQ(step->at, run.out.size());
        run.out.insert(run.out.end(), source.begin() + step->begin, source.begin() + step->end);
        run.forwarded += step->end - step->begin;
        break;
      case job::StepKind::kWrite:
        EXPECT_EQ(step->at, run.out.size());  // in order: a stream sink serves it
        run.out.insert(run.out.end(), step->bytes.begin(), step->bytes.end());
        break;
      case job::StepKind::kMessage: run.messages.emplace_back(step->text); break;
      case job::StepKind::kProgress:
        EXPECT_GE(step->done, run.last_done);
        run.last_done = step->done;
        run.last_total = step->total;
        break;
      case job::StepKind::kDone: return run;
    }
  }
  ADD_FAILURE() << "the job never finished";
  return run;
}

app::ConvertOptions Options(Dtype target, TensorOrder order, std::optional<uint64_t> size) {
  app::ConvertOptions o;
  o.target = target;
  o.order = order;
  o.input_size = size;
  return o;
}

TEST(ConvertJob, ProducesTheConvertersBytesInBothOrders) {
  const Bytes file = MixedFile();
  for (TensorOrder order : {TensorOrder::kReference, TensorOrder::kInput})
    for (Dtype target : {Dtype::BF16, Dtype::F16, Dtype::F32}) {
      app::ConvertJob job(Options(target, order, file.size()));
      JobRun run = Execute(job, file, SIZE_MAX, order == TensorOrder::kInput);
      ASSERT_FALSE(run.error) << run.error->message;
      EXPECT_EQ(run.out, Expected(file, target, order));
      EXPECT_EQ(job.output_size(), run.out.size());
      EXPECT_EQ(run.last_done, file.size());  // every byte of IN, header included
      EXPECT_EQ(run.last_total, file.size());
    }
}

TEST(ConvertJob, ForwardsWhatKeepsItsDtypeAndReadsTheRest) {
  const Bytes file = MixedFile();
  app::ConvertJob job(Options(Dtype::BF16, TensorOrder::kReference, file.size()));
  JobRun run = Execute(job, file, SIZE_MAX, false);
  ASSERT_FALSE(run.error);
  // a.bf16 (513 × 2 bytes) and ids (5 × 8) pass through unchanged; every float tensor of another dtype is read.
  EXPECT_EQ(run.forwarded, 513u * 2 + 5 * 8);
  EXPECT_EQ(run.kinds.front(), job::StepKind::kReadHeader);
  EXPECT_EQ(run.kinds.back(), job::StepKind::kDone);
  EXPECT_EQ(std::count(run.kinds.begin(), run.kinds.end(), job::StepKind::kForward), 2);
  EXPECT_GE(std::count(run.kinds.begin(), run.kinds.end(), job::StepKind::kRead), 3);
}

TEST(ConvertJob, AnySupplySizeGivesTheSameBytes) {
  const Bytes file = MixedFile();
  const Bytes expected = Expected(file, Dtype::F16, TensorOrder::kInput);
  for (size_t piece : {1, 2, 3, 5, 7, 64, 4099}) {
    app::ConvertJob job(Options(Dtype::F16, TensorOrder::kInput, std::nullopt));
    JobRun run = Execute(job, file, piece, true);
    ASSERT_FALSE(run.error) << piece << ": " << run.error->message;
    ASSERT_EQ(run.out, expected) << "piece " << piece;
    // A stream (no size) is never forwarded from: the job reads what passes through, to judge its end.
    EXPECT_EQ(std::count(run.kinds.begin(), run.kinds.end(), job::StepKind::kForward), 0);
  }
}

TEST(ConvertJob, ReadsAreBoundedWhateverTheTensorSize) {
  const Bytes file = MixedFile(3 << 20);  // a 12 MiB F32 tensor
  app::ConvertJob job(Options(Dtype::BF16, TensorOrder::kReference, file.size()));
  uint64_t largest = 0;
  for (;;) {
    auto step = job.Next();
    ASSERT_TRUE(step.ok());
    if (step->kind == job::StepKind::kDone) break;
    if (step->kind != job::StepKind::kRead && step->kind != job::StepKind::kReadHeader) continue;
    largest = std::max(largest, step->end - step->begin);
    ASSERT_TRUE(job.Supply(std::span(file.data() + step->begin, step->end - step->begin)).ok());
  }
  EXPECT_EQ(largest, app::kConvertReadPiece);
}

TEST(ConvertJob, TellsThePlanOnlyWhenAskedAndSummarisesAsJsonUnderJson) {
  const Bytes file = MixedFile();
  app::ConvertOptions o = Options(Dtype::BF16, TensorOrder::kReference, file.size());
  o.tell_plan = true;
  app::ConvertJob told(o);
  JobRun run = Execute(told, file, SIZE_MAX, false);
  ASSERT_EQ(run.messages.size(), 1u);
  EXPECT_EQ(run.messages[0].rfind("convert 4 of 6 tensors; output ", 0), 0u) << run.messages[0];
  EXPECT_EQ(told.summary(), "");
  // The message comes before the first byte of OUT is written.
  EXPECT_LT(std::find(run.kinds.begin(), run.kinds.end(), job::StepKind::kMessage) - run.kinds.begin(),
            std::find(run.kinds.begin(), run.kinds.end(), job::StepKind::kWrite) - run.kinds.begin());
  o.tell_plan = false;
  o.json = true;
  app::ConvertJob quiet(o);
  run = Execute(quiet, file, SIZE_MAX, false);
  EXPECT_TRUE(run.messages.empty());
  EXPECT_EQ(quiet.summary(), quiet.summary_json());
  EXPECT_NE(quiet.summary().find("\"converted\":4"), std::string::npos) << quiet.summary();
}

TEST(ConvertJob, StreamsEndWhereTheHeaderSays) {
  const Bytes file = MixedFile();
  // Truncated inside a tensor: the streaming reader's error.
  app::ConvertJob cut(Options(Dtype::BF16, TensorOrder::kInput, std::nullopt));
  JobRun run = Execute(cut, Bytes(file.begin(), file.end() - 10), 4096, true);
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, ErrorCode::MetadataIncompleteBuffer);
  // Trailing bytes after the last tensor of a stream of unknown size.
  Bytes longer = file;
  longer.push_back(0);
  app::ConvertJob trailing(Options(Dtype::BF16, TensorOrder::kInput, std::nullopt));
  run = Execute(trailing, longer, 4096, true);
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, ErrorCode::MetadataIncompleteBuffer);
  // Ended inside the length prefix.
  app::ConvertJob tiny(Options(Dtype::BF16, TensorOrder::kInput, std::nullopt));
  run = Execute(tiny, Bytes(3, 0), 4096, true);
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, ErrorCode::HeaderTooSmall);
}

TEST(ConvertJob, RefusesWhatTheProtocolForbidsAndStaysFailed) {
  const Bytes file = MixedFile();
  app::ConvertJob job(Options(Dtype::BF16, TensorOrder::kReference, file.size()));
  auto step = job.Next();
  ASSERT_TRUE(step.ok());
  ASSERT_EQ(step->kind, job::StepKind::kReadHeader);
  Bytes too_many(step->end - step->begin + 1, 0);
  EXPECT_FALSE(job.Supply(too_many).ok());
  EXPECT_FALSE(job.Next().ok());  // sticky
  app::ConvertJob bad_target(Options(Dtype::I32, TensorOrder::kReference, file.size()));
  JobRun run = Execute(bad_target, file, SIZE_MAX, false);
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code, ErrorCode::UnsupportedDtype);
  EXPECT_TRUE(std::find(run.kinds.begin(), run.kinds.end(), job::StepKind::kWrite) == run.kinds.end());
}

TEST(ConvertJob, TheOutputPolicyRefusesBeforeAnyRead) {
  app::ConvertOptions o = Options(Dtype::BF16, TensorOrder::kReference, 100);
  app::InputFact in;
  in.label = "IN";
  in.path = in.real = "/d/x.safetensors";
  in.id = "1:2";
  app::OutputRequest out;
  out.label = "OUT";
  out.path = "/d/x.safetensors";
  out.real = "/d";
  out.single_file = true;
  out.writes = {"x.safetensors"};
  out.listing.push_back({"x.safetensors", app::EntryKind::kFile, "1:2", ""});
  o.output = app::ConvertOptions::OutputCheck{{in}, out, {}};
  app::ConvertJob job(o);
  auto step = job.Next();
  ASSERT_FALSE(step.ok());  // OUT would replace IN
}

}  // namespace
}  // namespace pb::testing
