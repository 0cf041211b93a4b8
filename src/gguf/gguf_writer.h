// Writing a GGUF file as gguf-py's GGUFWriter does (the writer convert_lora_to_gguf.py uses), so that our bytes
// are its bytes: magic, version 3, tensor and key counts, the keys in order, the tensor infos (dims reversed to
// ggml order, offsets the running sum of padded sizes), zeros up to the alignment, then each tensor's data
// followed by zeros up to the alignment. Every size is known from the plan, so the header is written first and
// the tensors stream after it, one at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "gguf/gguf_format.h"

namespace pb::gguf {

// One key and its value. The types llama.cpp's adapter loader reads are the ones made here.
struct KeyValue {
  std::string key;
  ValueType type = ValueType::kString;
  std::string text;               // kString
  double number = 0;              // kFloat32, kUint32 (and the other scalar types)
  std::vector<uint32_t> uint32s;  // kArray of kUint32 (aLoRA invocation tokens)

  static KeyValue String(std::string key, std::string value);
  static KeyValue Float32(std::string key, float value);
  static KeyValue Uint32(std::string key, uint32_t value);
  static KeyValue Uint32Array(std::string key, std::vector<uint32_t> values);
};

struct TensorSlot {
  std::string name;
  std::vector<uint64_t> shape;  // PyTorch order (ggml's ne reversed)
  TensorType type = TensorType::kF32;
};

struct GgufLayout {
  std::vector<KeyValue> keys;
  std::vector<TensorSlot> tensors;
  uint32_t alignment = kDefaultAlignment;
  std::vector<uint64_t> offsets;  // per tensor, from the start of the data section
  std::vector<uint64_t> sizes;    // per tensor, unpadded
  uint64_t data_start = 0;        // the header's size, padded
  uint64_t file_size = 0;
};

// Bytes of a tensor of `shape` in `type`; InvalidArgument naming `name` if the last dim is not a whole number
// of blocks (llama.cpp refuses such a tensor) or the size overflows.
Result<uint64_t> TensorByteSize(const std::string& name, std::span<const uint64_t> shape, TensorType type);

// Checks what llama.cpp's reader would refuse (empty or repeated keys, names of 64 bytes or more, repeated
// names, 0 or more than 4 dims, partial blocks) and computes every offset.
Result<GgufLayout> PlanGguf(std::vector<KeyValue> keys, std::vector<TensorSlot> tensors,
                            uint32_t alignment = kDefaultAlignment);

// The first layout.data_start bytes of the file: everything before the first tensor's data.
std::vector<uint8_t> EncodeHeader(const GgufLayout& layout);

// The zeros after a tensor of `size` bytes (GGUFWriter.write_padding).
inline uint64_t PaddingAfter(uint64_t size, uint32_t alignment) { return Pad(size, alignment) - size; }

}  // namespace pb::gguf
