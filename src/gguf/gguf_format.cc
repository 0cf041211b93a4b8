#include "gguf/gguf_format.h"

namespace pb::gguf {

uint32_t ValueTypeSize(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    case ValueType::kString:
    case ValueType::kArray: return 0;
  }
  return 0;
}

std::string_view ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kUint8: return "UINT8";
    case ValueType::kInt8: return "INT8";
    case ValueType::kUint16: return "UINT16";
    case ValueType::kInt16: return "INT16";
    case ValueType::kUint32: return "UINT32";
    case ValueType::kInt32: return "INT32";
    case ValueType::kFloat32: return "FLOAT32";
    case ValueType::kBool: return "BOOL";
    case ValueType::kString: return "STRING";
    case ValueType::kArray: return "ARRAY";
    case ValueType::kUint64: return "UINT64";
    case ValueType::kInt64: return "INT64";
    case ValueType::kFloat64: return "FLOAT64";
  }
  return "?";
}

uint32_t BlockElements(TensorType type) { return type == TensorType::kQ8_0 ? 32 : 1; }

uint32_t BlockBytes(TensorType type) {
  switch (type) {
    case TensorType::kF32: return 4;
    case TensorType::kF16:
    case TensorType::kBF16: return 2;
    case TensorType::kQ8_0: return 34;
  }
  return 0;
}

std::string_view TensorTypeName(TensorType type) {
  switch (type) {
    case TensorType::kF32: return "F32";
    case TensorType::kF16: return "F16";
    case TensorType::kQ8_0: return "Q8_0";
    case TensorType::kBF16: return "BF16";
  }
  return "?";
}

std::optional<TensorType> TensorTypeFromId(uint32_t id) {
  switch (id) {
    case 0: return TensorType::kF32;
    case 1: return TensorType::kF16;
    case 8: return TensorType::kQ8_0;
    case 30: return TensorType::kBF16;
    default: return std::nullopt;
  }
}

std::optional<TensorType> ParseOutType(std::string_view name) {
  if (name == "f32") return TensorType::kF32;
  if (name == "f16") return TensorType::kF16;
  if (name == "bf16") return TensorType::kBF16;
  if (name == "q8_0") return TensorType::kQ8_0;
  return std::nullopt;
}

}  // namespace pb::gguf
