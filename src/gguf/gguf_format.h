// The GGUF container as ggml defines it (ggml docs/gguf.md, include/gguf.h, src/gguf.cpp; summarised in this
// repository's docs/gguf.md, "The container"): the constants the writer and the parser share, so each rule is
// stated once. GGUF v3, little-endian.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pb::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kVersion = 3;
inline constexpr uint32_t kDefaultAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT
inline constexpr size_t kMaxNameBytes = 63;        // GGML_MAX_NAME (64) includes the NUL
inline constexpr uint32_t kMaxDims = 4;            // GGML_MAX_DIMS

// gguf_type: the type of a key's value.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;
// Bytes of a fixed-size value (0 for strings and arrays).
uint32_t ValueTypeSize(ValueType type);
std::string_view ValueTypeName(ValueType type);  // "UINT8", ... "FLOAT64" as gguf-py's GGUFValueType names them

// The ggml tensor types a LoRA adapter is written in (llama.cpp's convert_lora_to_gguf.py --outtype) and read
// back from. Others exist (ggml.h); the parser names them in its refusal.
enum class TensorType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
// Elements per block and bytes per block (Q8_0: 32 weights in an fp16 scale and 32 int8: 34 bytes).
uint32_t BlockElements(TensorType type);
uint32_t BlockBytes(TensorType type);
std::string_view TensorTypeName(TensorType type);  // "F32", "F16", "Q8_0", "BF16" (ggml's names)
std::optional<TensorType> TensorTypeFromId(uint32_t id);
// The type that --outtype names ("f32", "f16", "bf16", "q8_0").
std::optional<TensorType> ParseOutType(std::string_view name);

// GGML_PAD: `n` rounded up to a multiple of `alignment` (a power of two).
inline uint64_t Pad(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace pb::gguf
