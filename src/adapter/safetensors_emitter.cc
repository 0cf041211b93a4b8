#include "adapter/safetensors_emitter.h"

namespace pb::adapter {

Status SafetensorsEmitter::Begin() {
  PB_ASSIGN_OR_RETURN(auto plan, PlanSafetensors(output_));
  writer_ = std::make_unique<StreamingWriter>(std::move(plan), sink_);
  PB_RETURN_IF_ERROR(writer_->Begin());
  return Advance();
}

Status SafetensorsEmitter::Advance() {
  const auto& planned = writer_->plan().tensors;
  while (next_ < planned.size()) {
    const size_t i = planned[next_].input_index;
    if (!output_.IsReference(i)) {
      PB_RETURN_IF_ERROR(writer_->Write(output_.data[i]));
      ++next_;
      continue;
    }
    if (!requested_) {
      fetch_.Request({&*output_.refs[i]});
      requested_ = true;
    }
    if (!fetch_.ready()) return Status::Ok();  // waiting for its bytes
    PB_RETURN_IF_ERROR(writer_->Write(fetch_.get(0)->bytes));
    fetch_.Release();
    requested_ = false;
    ++next_;
  }
  return Status::Ok();
}

Status SafetensorsEmitter::SupplyAdapter(std::span<const uint8_t> bytes) {
  if (!writer_ || !requested_) return MakeError(ErrorCode::InvalidArgument, "adapter bytes that were not asked for");
  PB_RETURN_IF_ERROR(fetch_.Supply(bytes));
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
