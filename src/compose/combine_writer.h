// Writes the combined adapter's weights file as the plan says, one module at a time: the header first, then,
// for each module, its factors fetched from every input that has it (by range, as the edge supplies them),
// combined (combine_math.h), rounded to the output dtype and written, and its error against the exact
// combination measured. Memory: one module's factors over the inputs, never a whole adapter.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "adapter/tensor_fetch.h"
#include "compose/combine_plan.h"
#include "core/writer.h"

namespace pb::compose {

// A range of input `input`'s weights file.
struct InputRange {
  size_t input = 0;
  adapter::ByteRange range;
};

struct ModuleOutcome {
  double relative_error = 0;          // ‖ΔW_result − ΔW_exact‖ / ‖ΔW_exact‖, as PEFT applies the result
  std::optional<double> kept_energy;  // the SVD methods
};

class CombineWriter {
 public:
  CombineWriter(const CombinePlan& plan, const std::vector<CombineInput>& inputs, ByteSink& sink);
  ~CombineWriter();
  // Writes the header, then every tensor whose inputs are held.
  Status Begin();
  // The ranges to read next, in order; supply their bytes concatenated, in chunks of any size. The list changes
  // once its last byte is supplied (edges copy it first); empty when nothing is awaited.
  const std::vector<InputRange>& needs() const { return needs_; }
  Status Supply(std::span<const uint8_t> bytes);
  // Checks that every tensor was written.
  Status Finish();
  // Per planned module, once it is written.
  const std::vector<ModuleOutcome>& outcomes() const { return outcomes_; }
  uint64_t peak_input_bytes() const { return peak_; }

 private:
  Status Advance();
  Status Compute(size_t item);
  void Renumber();

  const CombinePlan& plan_;
  const std::vector<CombineInput>& inputs_;
  ByteSink& sink_;
  std::unique_ptr<StreamingWriter> writer_;
  std::vector<adapter::TensorFetch> fetch_;  // per input
  std::vector<uint64_t> awaited_;            // per input: bytes still to supply
  std::vector<InputRange> needs_;
  size_t next_ = 0;                         // position in the write plan
  std::optional<size_t> requested_;         // the item (module, or modules + extra) whose inputs were requested
  std::optional<size_t> computed_;          // the item whose tensors are held below
  std::vector<std::vector<uint8_t>> held_;  // its tensors' bytes by output tensor index (one module's)
  std::vector<size_t> item_of_tensor_;      // output tensor index -> item
  std::vector<ModuleOutcome> outcomes_;
  uint64_t peak_ = 0;
};

}  // namespace pb::compose
