#include "adapter/safetensors_emitter.h"

namespace pb::adapter {

Status SafetensorsEmitter::Begin() {
  auto plan = PlanSafetensors(output_);
  if (!plan.ok()) return plan.error();
  writer_ = std::make_unique<StreamingWriter>(std::move(plan.value()), sink_);
  if (Status s = writer_->Begin(); !s.ok()) return s;
  return Advance();
}

Status SafetensorsEmitter::Advance() {
  const auto& planned = writer_->plan().tensors;
  while (next_ < planned.size()) {
    const size_t i = planned[next_].input_index;
    if (!output_.IsReference(i)) {
      if (Status s = writer_->Write(output_.data[i]); !s.ok()) return s;
      ++next_;
      continue;
    }
    if (!requested_) {
      fetch_.Request({&*output_.refs[i]});
      requested_ = true;
    }
    if (!fetch_.ready()) return Status::Ok();  // waiting for its bytes
    if (Status s = writer_->Write(fetch_.get(0)->bytes); !s.ok()) return s;
    fetch_.Release();
    requested_ = false;
    ++next_;
  }
  return Status::Ok();
}

Status SafetensorsEmitter::SupplyAdapter(std::span<const uint8_t> bytes) {
  if (!writer_ || !requested_) return MakeError(ErrorCode::InvalidArgument, "adapter bytes that were not asked for");
  if (Status s = fetch_.Supply(bytes); !s.ok()) return s;
  return Advance();
}

Status SafetensorsEmitter::Finish() {
  if (!writer_) return MakeError(ErrorCode::InvalidArgument, "Finish before Begin");
  if (next_ < writer_->plan().tensors.size())
    return MakeError(ErrorCode::InvalidArgument, "the adapter bytes of `" +
                                                     output_.tensors[writer_->plan().tensors[next_].input_index].name +
                                                     "` were not supplied");
  return writer_->Finish();
}

}  // namespace pb::adapter
