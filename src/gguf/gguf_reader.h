// Reading a GGUF container's header (magic, version, keys, tensor infos) as ggml's gguf_init_from_file does, sans
// I/O (docs/gguf.md, "The container" and "Reading .gguf adapters"): the edge gives the file's first bytes; when
// they do not reach the end of the tensor infos, the parse says how many it needs (`need`) and the edge reads
// that many and calls again.
// The tensors' bytes are not read here: each tensor's range is in the header, and consumers fetch it by range.
//
// The rules are ggml's, each refusal a precise Error naming the key or tensor and the byte offset: the magic;
// version 2 or 3 (0 bad, 1 no longer supported, a low half of zero an endianness mismatch, above 3 too new);
// non-empty unique keys; value types in gguf_type (an array of arrays refused); general.alignment a UINT32 power
// of two; tensor names under 64 bytes and unique; at most 4 dims; dims whose product fits in int64; a known ggml
// type whose block divides ne[0]; each offset the running sum of the padded sizes before it. Beyond ggml, to
// bound memory against hostile counts: nothing is allocated for a count before the bytes it claims are present,
// the header may not exceed kMaxHeaderBytes, and when the file's size is known every tensor must lie inside it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "gguf/gguf_format.h"

namespace pb::gguf {

// The most header bytes (everything before the data section) a reader accepts. llama.cpp LoRA adapters have a
// few kilobytes; a model's header with a 150,000-token vocabulary a few megabytes.
inline constexpr uint64_t kMaxHeaderBytes = 64ull << 20;
// The bytes an edge reads first (then the parse asks for what it lacks).
inline constexpr uint64_t kFirstReadBytes = 64ull << 10;

// One key and its value. Strings and fixed-size values are kept; an array keeps its fixed-size elements' bytes,
// and only the count of its strings (no LoRA key reads them).
struct GgufKey {
  std::string key;
  ValueType type = ValueType::kUint8;
  ValueType element_type = ValueType::kUint8;  // kArray
  uint64_t count = 1;                          // kArray: elements
  uint64_t offset = 0;                         // absolute offset of the key's length field
  std::string text;                            // kString
  std::vector<uint8_t> raw;                    // scalars and arrays of fixed-size elements: little-endian bytes
  // The value as a number (scalars except strings; bool 0/1), nullopt otherwise.
  std::optional<double> Number() const;
  // The value as text for reports: strings as they are, numbers in their shortest exact form, arrays as
  // "[N × TYPE]".
  std::string Render() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;             // ggml order: ne[0] is the innermost dimension
  uint32_t type = 0;                    // ggml_type
  uint64_t offset = 0;                  // from the start of the data section
  uint64_t size = 0;                    // bytes, unpadded
  uint64_t info_offset = 0;             // absolute offset of its info record (for messages)
  std::vector<uint64_t> Shape() const;  // PyTorch order (ne reversed)
};

struct GgufFile {
  uint32_t version = kVersion;
  std::vector<GgufKey> keys;
  std::vector<GgufTensorInfo> tensors;
  uint32_t alignment = kDefaultAlignment;
  uint64_t infos_end = 0;   // where the tensor infos end (the padding before the data section starts)
  uint64_t data_start = 0;  // absolute offset of the data section (the header's size, padded)
  uint64_t data_size = 0;   // the tensors' padded sizes summed
  const GgufKey* Find(std::string_view key) const;
  // A STRING key's value; nullopt if absent or of another type.
  std::optional<std::string> String(std::string_view key) const;
  uint64_t TensorBegin(size_t i) const { return data_start + tensors[i].offset; }
  uint64_t TensorEnd(size_t i) const { return TensorBegin(i) + tensors[i].size; }
};

// A ggml tensor type as gguf-py's GGML_QUANT_SIZES gives it (elements per block, bytes per block); nullopt for an
// id ggml does not define (or defines no more: 4, 5, 31-33, 36-38).
struct GgmlTypeTraits {
  std::string_view name;
  uint32_t block_elements;
  uint32_t block_bytes;
};
inline constexpr uint32_t kGgmlTypeCount = 43;  // GGML_TYPE_COUNT
std::optional<GgmlTypeTraits> GgmlType(uint32_t id);

struct GgufParse {
  std::optional<GgufFile> file;  // set when `prefix` held the whole header
  uint64_t need = 0;             // otherwise: call again with at least this many bytes of the file's start
};

// `s` for a message: in backquotes, printable ASCII kept, other bytes as \xNN, cut after 200 bytes.
std::string Quote(std::string_view s);

// True when `prefix` starts with the GGUF magic.
bool LooksLikeGguf(std::span<const uint8_t> prefix);

// Parses the header from the file's first bytes. `file_size`, when known, bounds every count and tensor.
Result<GgufParse> ParseGgufHeader(std::span<const uint8_t> prefix, std::optional<uint64_t> file_size);

}  // namespace pb::gguf
