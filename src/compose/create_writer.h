// Making a planned fresh adapter's bytes (create_plan.h), one tensor at a time:
//  - DoRA first: MagnitudePass takes the targeted base weights' bytes (each module's [begin, end), in plan
//    order, in chunks of any size) and keeps each layer's row norms ‖W[i, :]‖ (Conv1D: of Wᵀ), summed in
//    float64 and rounded to the base weight's dtype, as PEFT's get_weight_norm returns them
//    (torch.linalg.norm(W + s·B·A, dim=1).to(W.dtype), with B = 0). Memory: the norms, and one element carried
//    across a chunk boundary.
//  - Then AdapterEmitter writes adapter_model.safetensors: the header, then each tensor in file order, made
//    when its turn comes (A from the init's distribution, B zero, the magnitudes), so at most one tensor is held.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "compose/create_plan.h"
#include "core/writer.h"

namespace pb::compose {

class MagnitudePass {
 public:
  explicit MagnitudePass(const CreatePlan& plan);
  // The ranges still to supply (shard, begin, end), in the order Push takes them: every DoRA module's weight.
  struct Range {
    size_t module;
    size_t shard;
    uint64_t begin, end;
  };
  const std::vector<Range>& ranges() const { return ranges_; }
  uint64_t total_bytes() const { return total_; }
  // The next bytes of the ranges, in order (a chunk may span ranges).
  Status Push(std::span<const uint8_t> bytes);
  bool done() const { return next_ == ranges_.size(); }
  // Per module (empty for modules without DoRA): the magnitudes, as floats of the weight's dtype.
  std::vector<std::vector<float>> TakeNorms();

 private:
  Status Elements(const uint8_t* p, size_t count);  // `count` whole elements of the current range
  const CreatePlan& plan_;
  std::vector<Range> ranges_;
  uint64_t total_ = 0;
  size_t next_ = 0;      // range being filled
  uint64_t filled_ = 0;  // its bytes so far
  std::vector<uint8_t> carry_;
  std::vector<double> sums_;  // the current module's squared sums, per output row
  std::vector<std::vector<float>> norms_;
};

// The values of one output tensor of the plan, in its dtype's bytes (little-endian).
std::vector<uint8_t> MakeTensorBytes(const CreatePlan& plan, size_t tensor,
                                     const std::vector<std::vector<float>>& norms);

class AdapterEmitter {
 public:
  // `norms`: MagnitudePass's (DoRA), else empty.
  AdapterEmitter(const CreatePlan& plan, std::vector<std::vector<float>> norms, ByteSink& sink);
  ~AdapterEmitter();
  Status Begin();  // the header
  // The next tensor in file order; false once every tensor was written (then Finish).
  Result<bool> Next();
  Status Finish();

 private:
  const CreatePlan& plan_;
  std::vector<std::vector<float>> norms_;
  ByteSink& sink_;
  std::unique_ptr<StreamingWriter> writer_;
  size_t next_ = 0;
};

}  // namespace pb::compose
