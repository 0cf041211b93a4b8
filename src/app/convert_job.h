// `convert IN OUT`: the whole one-file conversion as a job (job/job.h, docs/jobs.md), the one sequence the native
// CLI, the npm CLI and the JS API's convert() run:
//   1. the output policy (app/output_policy.h) on the facts the front end gathered, when it writes a file;
//   2. IN's header, read and checked (every check of the streaming reader, coverage against IN's size);
//   3. the plan (convert/convert_stream.h: PlanConversion), told as a message unless --json or --quiet;
//   4. OUT's bytes in order: the header, then each planned tensor; a tensor whose dtype stays is forwarded from IN
//      unchanged, the others are read in pieces of at most kReadPiece bytes and written converted;
//   5. for a stream of unknown size, a read past the last tensor that must find the stream's end;
//   6. done: the summary (the JSON document under --json) is ready for after the commit.
// In input order the reads go forward through IN (a stream serves them); reference order needs random access.
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/command_job.h"
#include "app/command_line.h"
#include "app/output_policy.h"
#include "convert/convert_stream.h"
#include "core/reader.h"
#include "job/job.h"

namespace pb::app {

// The largest read the job asks for: bounds its memory whatever the tensor size (8 MiB: the JS window, so the
// npm CLI reads as much per call as it did before the job; docs/benchmarks.md).
inline constexpr uint64_t kConvertReadPiece = 8 << 20;

struct ConvertOptions {
  Dtype target = Dtype::BF16;
  TensorOrder order = TensorOrder::kReference;
  std::optional<uint64_t> input_size;  // IN's size; none for a stream
  bool tell_plan = false;              // the plan's text as a message before the work (not --json, not --quiet)
  bool json = false;                   // the summary is the JSON document (--json)
  // The output policy's facts (OUT written as a file by a CLI); none when the output is the caller's stream.
  struct OutputCheck {
    std::vector<InputFact> inputs;
    OutputRequest out;
    OutputFlags flags;
  };
  std::optional<OutputCheck> output;
};

// The options `convert IN OUT [--dtype D] [--order O] [--json] [--quiet]` asks for (the grammar has checked them).
ConvertOptions ConvertOptionsFromLine(const CommandLine& line, std::optional<uint64_t> input_size);

class ConvertJob final : public CommandJob, private ReaderEvents {
 public:
  explicit ConvertJob(ConvertOptions options);
  // Once the header is planned (after the first write step): the output policy's plan (empty without a check),
  // the planned output's size.
  const OutputPlan& output_plan() const override { return output_plan_; }
  std::optional<uint64_t> output_size() const override;
  // At kDone: what the command prints once its output is in place ("" for text: the plan was told before).
  const std::string& summary() const override { return summary_; }
  // The converted tensors' counts and sizes, for the JS API's summary.
  std::string summary_json() const;

 private:
  enum class Phase : uint8_t { kPolicy, kHeader, kPlan, kMessage, kOutputHeader, kTensors, kEnd, kDone };
  Status OnHeader(const Header&) override { return Status::Ok(); }
  Status OnTensorData(size_t, uint64_t, std::span<const uint8_t>) override { return Status::Ok(); }
  Result<job::Step> Advance() override;
  Status Accept(std::span<const uint8_t> bytes) override;
  Status SupplyTensor(std::span<const uint8_t> bytes);
  Status InputEnded();
  uint64_t InputTotal() const;

  ConvertOptions options_;
  StreamingReader reader_;
  Phase phase_ = Phase::kPolicy;
  OutputPlan output_plan_;
  std::optional<ConversionPlan> plan_;
  std::string plan_text_, summary_;
  size_t tensor_ = 0;       // planned tensor being produced
  uint64_t consumed_ = 0;   // source bytes of it done
  uint64_t read_done_ = 0;  // bytes of IN through (progress)
  bool write_pending_ = false, progress_pending_ = false;
  uint64_t write_at_ = 0;
  // The converted bytes of the last supply, page-aligned. Allocated with aligned_alloc, as the WASM handles'
  // buffers are (wasm/handle.h): in WASM, operator new and malloc end the module when the heap is full, and
  // aligned_alloc returns null, so a heap that cannot hold the bytes fails the supply with IoError.
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> out_;
  size_t out_capacity_ = 0, out_len_ = 0;
  uint8_t carry_[8] = {};  // a source element split across two supplies
  size_t carry_len_ = 0;
};

}  // namespace pb::app
