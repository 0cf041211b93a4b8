#include "adapter/weights_emitter.h"

#include "adapter/gguf_emitter.h"
#include "adapter/safetensors_emitter.h"

namespace pb::adapter {

std::unique_ptr<WeightsEmitter> MakeWeightsEmitter(const AdapterOutput& output, ByteSink& sink) {
  if (output.gguf) return std::make_unique<GgufEmitter>(*output.gguf, sink);
  return std::make_unique<SafetensorsEmitter>(output.weights, sink);
}

}  // namespace pb::adapter
