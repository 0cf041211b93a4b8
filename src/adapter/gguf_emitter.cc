#include "adapter/gguf_emitter.h"

#include "gguf/gguf_encode.h"
#include "kernels/convert.h"

namespace pb::adapter {

Status GgufEmitter::Begin() {
  PB_ASSIGN_OR_RETURN(auto layout, gguf::PlanGguf(output_.keys, output_.slots));
  layout_ = std::move(layout);
  PB_RETURN_IF_ERROR(sink_.Write(gguf::EncodeHeader(layout_)));
  begun_ = true;
  return Advance();
}

Status GgufEmitter::WriteTensor(size_t index, const Tensor& tensor) {
  const gguf::TensorSlot& slot = layout_.tensors[index];
  const uint64_t count = tensor.element_count();
  std::vector<float> values(count);
  if (!kernels::ConvertElements(tensor.dtype, Dtype::F32, tensor.bytes.data(), values.data(), count))
    return MakeError(ErrorCode::UnsupportedDtype,
                     "`" + slot.name + "`: " + std::string(DtypeName(tensor.dtype)) +
                         " cannot be written to GGUF (floating-point tensors only)",
                     slot.name);
  std::vector<uint8_t> bytes;
  gguf::EncodeValues(slot.type, values, bytes);
  if (bytes.size() != layout_.sizes[index])
    return MakeError(ErrorCode::InvalidArgument, "internal: `" + slot.name + "` encoded to " +
                                                     std::to_string(bytes.size()) + " bytes, planned " +
                                                     std::to_string(layout_.sizes[index]));
  bytes.resize(bytes.size() + gguf::PaddingAfter(bytes.size(), layout_.alignment), 0);
  return sink_.Write(bytes);
}

Status GgufEmitter::Advance() {
  while (next_ < output_.tensors.size()) {
    const Tensor& t = output_.tensors[next_];
    if (t.held()) {
      PB_RETURN_IF_ERROR(WriteTensor(next_, t));
      ++next_;
      continue;
    }
    if (!requested_) {
      fetch_.Request({&t});
      requested_ = true;
    }
    if (!fetch_.ready()) return Status::Ok();  // waiting for its bytes
    PB_RETURN_IF_ERROR(WriteTensor(next_, *fetch_.get(0)));
    fetch_.Release();
    requested_ = false;
    ++next_;
  }
  return Status::Ok();
}

Status GgufEmitter::SupplyAdapter(std::span<const uint8_t> bytes) {
  if (!begun_ || !requested_) return MakeError(ErrorCode::InvalidArgument, "adapter bytes that were not asked for");
  PB_RETURN_IF_ERROR(fetch_.Supply(bytes));
  return Advance();
}

Status GgufEmitter::Finish() {
  if (!begun_) return MakeError(ErrorCode::InvalidArgument, "Finish before Begin");
  if (next_ < output_.tensors.size())
    return MakeError(ErrorCode::InvalidArgument,
                     "the adapter bytes of `" + output_.slots[next_].name + "` were not supplied");
  return Status::Ok();
}

Status EmitGguf(const GgufOutput& output, ByteSink& sink) {
  GgufEmitter emitter(output, sink);
  PB_RETURN_IF_ERROR(emitter.Begin());
  if (!emitter.adapter_needs().empty())
    return MakeError(ErrorCode::InvalidArgument, "internal: a GGUF tensor is a reference; write it with GgufEmitter");
  return emitter.Finish();
}

}  // namespace pb::adapter
