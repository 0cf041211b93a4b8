// An adapter's weights file as it is written, whatever its container (safetensors or GGUF): the edges drive one
// interface, Begin, then the adapter bytes it asks for (AdapterBytesConsumer), then Finish.
#pragma once

#include <memory>

#include "adapter/adapter_io.h"
#include "adapter/tensor_fetch.h"

namespace pb::adapter {

class WeightsEmitter : public AdapterBytesConsumer {
 public:
  virtual Status Begin() = 0;
  virtual Status Finish() = 0;
};

// A GgufEmitter for an output with `gguf`, else a SafetensorsEmitter; both keep references to output and sink.
std::unique_ptr<WeightsEmitter> MakeWeightsEmitter(const AdapterOutput& output, ByteSink& sink);

}  // namespace pb::adapter
