// `translate IN_DIR OUT` and `adapter-info IN_DIR` as one job (job/job.h, docs/jobs.md), the one sequence the
// native CLI, the npm CLI and the JS API's translateAdapter() and adapterInfo() run. Its inputs, each of a known
// size: 0 the adapter's weights file (safetensors or .gguf), 1 its adapter_config.json, 2 the base model's
// config.json (1 and 2 when there are such files). The configs are inputs, not text in the options, so that their
// bytes reach the parsers unchanged from every front end (the JS API takes them as bytes or strings); the front end
// still chooses which base config (app/base_config_source.h: it needs file-system facts) and opens it.
//   1. the configs, read whole (kRead), then the weights file's header (kReadHeader) and the few tiny tensors
//      readers inspect (kRead);
//   2. the adapter read (adapter::ReadAdapter), and for adapter-info the ‖ΔW‖ pass over each module's factors
//      (kRead); for translate, adapter::Translate, which applies the no-silent-loss rule;
//   3. translate: the output policy on the facts the front end gathered (links out of IN_DIR, then, unless
//      --dry-run, OUT), the --allow-partial warnings (a message for stderr);
//   4. unless --dry-run: the plan told as a message (unless --json or --quiet), then output 0 (the weights file)
//      written in order of offset as each tensor's bytes are read, with progress over the weights file, then
//      output 1 (the config file, when the format has one);
//   5. done: the summary (the JSON document, the dry run's text, or the outcome line) is ready.
// adapter-info is a mode of this job, not a job of its own: its sequence is translate's first two steps, the
// same header and the same read, and only the pass over the tensors and the summary differ.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "adapter/delta_norm.h"
#include "adapter/translate.h"
#include "adapter/weights_emitter.h"
#include "app/command_job.h"
#include "app/command_line.h"
#include "app/output_policy.h"
#include "core/header.h"
#include "gguf/gguf_reader.h"
#include "job/job.h"

namespace pb::app {

// The largest read of the weights file the job asks for at a time (the native CLI's piece before the job).
inline constexpr uint64_t kAdapterReadPiece = 1 << 20;

struct TranslateOptions {
  bool info = false;                                          // adapter-info: read and describe, write nothing
  adapter::AdapterFormat to = adapter::AdapterFormat::kPeft;  // translate's --to
  adapter::ReadOptions read;                                  // its `tables` is set from `tables` when null
  adapter::WriteOptions write;  // likewise; base_config_note and _hint are the front end's choice's
  std::shared_ptr<const adapter::NamingTables> tables;  // the --naming-table files' tables; null: the embedded ones
  std::string weights_name;                             // the weights file's name (messages)
  uint64_t weights_size = 0;
  std::optional<uint64_t> config_size;       // input 1's size, when the adapter has adapter_config.json
  std::optional<uint64_t> base_config_size;  // input 2's size, when the front end chose a base config
  bool dry_run = false;
  bool json = false;   // the summary is the JSON document (--json)
  bool quiet = false;  // no plan, no outcome line (--quiet)
  // The output policy's facts, when a CLI writes files: the inputs (links out of IN_DIR are refused) and, unless
  // --dry-run, OUT described with TranslateOutputNames.
  struct OutputCheck {
    std::vector<InputFact> inputs;
    std::optional<OutputRequest> out;
    OutputFlags flags;
  };
  std::optional<OutputCheck> output;
};

// The options `adapter-info IN_DIR ...` or `translate IN_DIR OUT --to F ...` asks for (the grammar has checked
// them): everything but the files and the tables, which the front end adds.
TranslateOptions TranslateOptionsFromLine(const CommandLine& line, bool info);

class TranslateJob final : public CommandJob {
 public:
  explicit TranslateJob(TranslateOptions options);

  // Whether the weights file's header was read: an error before it is the input's (the front end explains it).
  bool adapter_read() const { return adapter_read_; }
  // Once planned (before the first write): the output policy's plan (empty without a check) and the names of
  // outputs 0 and 1 (the weights file, then the config file when there is one).
  const OutputPlan& output_plan() const override { return output_plan_; }
  std::vector<std::string> output_names() const override;
  // At kDone: what the command prints once its output is in place ("" under --quiet).
  const std::string& summary() const override { return summary_; }

 private:
  enum class Phase : uint8_t {
    kConfigs,
    kPrefix,
    kGguf,
    kJson,
    kInline,
    kPolicy,
    kOutput,
    kTell,
    kBegin,
    kServe,
    kFinish,
    kConfig,
    kDone
  };
  // Collects what the emitter writes; the job hands it on as kWrite steps.
  struct Written final : ByteSink {
    std::vector<uint8_t> bytes;
    Status Write(std::span<const uint8_t> b) override {
      bytes.insert(bytes.end(), b.begin(), b.end());
      return Status::Ok();
    }
  };
  Result<job::Step> Advance() override;
  Status Accept(std::span<const uint8_t> bytes) override;
  Error Named(Error error) const;
  Status ReadAdapterNow();
  Status SupplyHeader(std::span<const uint8_t> bytes);

  TranslateOptions options_;
  Phase phase_ = Phase::kConfigs;
  bool adapter_read_ = false;
  std::optional<std::string> config_, base_config_;  // inputs 1 and 2, read whole
  size_t text_input_ = 1;                            // the config being read
  // The header: the file's first bytes (safetensors: the length and the JSON; .gguf: what the parse asked for).
  std::vector<uint8_t> head_;
  uint64_t head_want_ = 0;
  Header header_;
  std::optional<gguf::GgufFile> gguf_;
  std::vector<adapter::ByteRange> inline_ranges_;
  std::vector<uint8_t> inline_;
  size_t inline_index_ = 0;
  uint64_t inline_got_ = 0;
  std::unique_ptr<adapter::ReadResult> read_;  // adapter-info (DeltaNormPass holds a reference to its adapter)
  std::unique_ptr<adapter::DeltaNormPass> norms_;
  std::unique_ptr<adapter::TranslateResult> result_;  // translate (the emitter holds a reference to its output)
  std::unique_ptr<adapter::WeightsEmitter> emitter_;
  adapter::AdapterBytesConsumer* consumer_ = nullptr;
  std::vector<adapter::ByteRange> serving_;  // the consumer's needs, copied (the list changes once served)
  size_t serve_index_ = 0;
  uint64_t serve_pos_ = 0;
  uint64_t supplied_ = 0;  // bytes of the weights file supplied to the consumer (progress)
  OutputPlan output_plan_;
  std::string plan_text_, summary_;
  Written written_;
  bool written_out_ = false;  // written_'s bytes were handed out: cleared at the next call
  uint64_t write_at_ = 0;
  bool progress_pending_ = false;
};

}  // namespace pb::app
