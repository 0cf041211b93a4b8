// The one I/O protocol of peft-bridge's commands (docs/jobs.md). A command's whole sequence (its plan, its output
// policy, the order of its outputs, what it tells the user, its summary) is a Job: a sans-I/O state machine that
// says, one step at a time, which bytes it needs and which bytes it produces. A runtime's executor (the native
// CLI's pread/pwrite runner, the JS driver over the WASM module) carries the bytes and shows the text:
//
//   for (;;) {
//     step = job.Next()                        (an error ends the run: nothing is committed)
//     kReadHeader, kRead: read input[step.input] at [step.begin, step.end), Supply a prefix of it (any non-empty
//                         length up to the whole range; Next then asks for the rest), or Supply nothing when the
//                         input ends before step.begin (a stream's end)
//     kForward:  copy input[step.input][begin, end) unchanged to output[step.output] at step.at (copy_file_range,
//                or read and write); the job is not told the bytes
//     kWrite:    write step.bytes to output[step.output] at step.at (the span lives until the next call)
//     kMessage:  show step.text to the user now (the CLIs' stdout; stderr when step.warning)
//     kProgress: step.done of step.total bytes of input[step.input] are through (total 0: not known yet)
//     kDone:     commit every output at once; the job's summary is ready
//   }
//
// A job's reads go forward through each input when its options say the input is a stream, so a sequential source
// serves them; writes to an output come in order of offset, so a stream sink serves them too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/error.h"
#include "core/result.h"

namespace pb::job {

// A kProgress step's input when the progress is through the job's reads as a whole, no one input named.
inline constexpr size_t kAllInputs = SIZE_MAX;

enum class StepKind : uint8_t { kReadHeader, kRead, kForward, kWrite, kMessage, kProgress, kDone };

// Its name as the JS driver sees it: "readHeader", "read", "forward", "write", "message", "progress", "done".
std::string_view StepKindName(StepKind kind);

struct Step {
  StepKind kind = StepKind::kDone;
  size_t input = 0;                  // kReadHeader, kRead, kForward, kProgress
  uint64_t begin = 0, end = 0;       // kReadHeader, kRead, kForward: the input's bytes [begin, end)
  size_t output = 0;                 // kForward, kWrite
  uint64_t at = 0;                   // kForward, kWrite: the offset in the output
  std::span<const uint8_t> bytes{};  // kWrite
  std::string_view text{};           // kMessage
  bool warning = false;              // kMessage: for the user's error stream (the CLIs' stderr), not stdout
  uint64_t done = 0, total = 0;      // kProgress

  static Step ReadHeader(size_t input, uint64_t begin, uint64_t end) {
    return {.kind = StepKind::kReadHeader, .input = input, .begin = begin, .end = end};
  }
  static Step Read(size_t input, uint64_t begin, uint64_t end) {
    return {.kind = StepKind::kRead, .input = input, .begin = begin, .end = end};
  }
  static Step Forward(size_t input, uint64_t begin, uint64_t end, size_t output, uint64_t at) {
    return {.kind = StepKind::kForward, .input = input, .begin = begin, .end = end, .output = output, .at = at};
  }
  static Step Write(size_t output, uint64_t at, std::span<const uint8_t> bytes) {
    return {.kind = StepKind::kWrite, .output = output, .at = at, .bytes = bytes};
  }
  static Step Message(std::string_view text) { return {.kind = StepKind::kMessage, .text = text}; }
  static Step Warning(std::string_view text) { return {.kind = StepKind::kMessage, .text = text, .warning = true}; }
  static Step Progress(size_t input, uint64_t done, uint64_t total) {
    return {.kind = StepKind::kProgress, .input = input, .done = done, .total = total};
  }
};

// A job's two calls, with the protocol's own rules applied here once for every job: errors are sticky (once Next or
// Supply failed, both return that error), and Supply answers the read Next asked for last, with at most its length
// (anything else is InvalidArgument). A job writes Advance (its next step) and Accept (a valid answer to its read).
class Job {
 public:
  virtual ~Job() = default;
  // The next step.
  Result<Step> Next();
  // The bytes of the read Next asked for last: a prefix of its range, or nothing for an input that ended.
  Status Supply(std::span<const uint8_t> bytes);

 protected:
  virtual Result<Step> Advance() = 0;
  virtual Status Accept(std::span<const uint8_t> bytes) = 0;
  // Makes `error` the job's sticky error and returns it (an error Advance or Accept returns is made sticky anyway).
  Status Fail(Error error);

 private:
  std::optional<Error> error_;
  uint64_t asked_ = 0;       // the length of the read asked last (Supply takes at most that)
  bool asked_read_ = false;  // the last step was a read
};

}  // namespace pb::job
