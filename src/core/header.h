// The parsed, validated header of a safetensors file, stored as compact records.
//
// A 200,000-tensor header (about 20 MB of JSON) must parse within a small memory budget, so the
// header keeps its raw JSON bytes and each tensor is a 32-byte record pointing into them: names
// without escapes are views into the raw text; only escaped names are decoded into a side arena.
// Tensors are kept in data order (sorted by data offsets), the order their bytes appear in the file.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace pb {

// The safetensors `__metadata__` map, in document order.
using Metadata = std::vector<std::pair<std::string, std::string>>;

inline constexpr uint64_t kMaxHeaderSize = 100'000'000;  // reference MAX_HEADER_SIZE, inclusive

struct TensorInfo {
  std::string_view name;
  Dtype dtype;
  std::span<const uint64_t> shape;
  uint64_t begin;  // data_offsets[0], relative to the start of the data region
  uint64_t end;    // data_offsets[1], exclusive
  uint64_t byte_length() const { return end - begin; }
  uint64_t element_count() const;  // product of shape (1 for a scalar); fits after validation
};

class Header {
 public:
  size_t tensor_count() const { return records_.size(); }
  TensorInfo tensor(size_t index) const;  // index in data order
  std::optional<size_t> Find(std::string_view name) const;

  uint64_t header_size() const { return header_size_; }     // N, the JSON length incl. padding
  uint64_t data_start() const { return 8 + header_size_; }  // absolute offset of the data region
  uint64_t data_size() const { return data_size_; }         // end of the last tensor
  uint64_t file_size() const { return data_start() + data_size_; }
  std::string_view json() const { return raw_; }       // the header JSON as read (names not escaped point here)
  bool has_metadata() const { return has_metadata_; }  // false if absent or null
  const Metadata& metadata() const { return metadata_; }

 private:
  friend class HeaderBuilder;
  struct Record {
    uint64_t begin;
    uint64_t end;
    uint32_t name_offset;  // into raw_ or, when name_decoded, into decoded_names_
    uint32_t name_size;
    uint32_t shape_offset;  // into dims_
    // Packed so a record stays 32 bytes. The format sets no rank limit; a 100 MB header holds fewer
    // than 2^26 dims (each takes at least two bytes, "0,").
    uint32_t rank : 26;
    uint32_t name_decoded : 1;
    uint32_t dtype_code : 5;  // a Dtype (22 values)
    Dtype dtype() const { return static_cast<Dtype>(dtype_code); }
  };
  static_assert(sizeof(Record) == 32, "a tensor record is 32 bytes");
  std::string raw_;            // the header JSON as read
  std::string decoded_names_;  // names that contained escapes
  std::vector<Record> records_;
  std::vector<uint64_t> dims_;
  // Open-addressing hash table of record indices keyed by name (kEmptySlot marks free slots). It
  // detects repeated names while parsing and serves Find; cheaper than sorting 200,000 long names.
  std::vector<uint32_t> name_slots_;
  static constexpr uint32_t kEmptySlot = UINT32_MAX;
  size_t SlotFor(std::string_view name) const;  // slot holding `name`, or the free slot where it would go
  Metadata metadata_;
  bool has_metadata_ = false;
  uint64_t header_size_ = 0;
  uint64_t data_size_ = 0;
  std::string_view RecordName(const Record& r) const;
};

// Decodes the 8-byte little-endian length prefix. `prefix` is what is available of the file's start.
// HeaderTooSmall if fewer than 8 bytes, HeaderTooLarge if N > kMaxHeaderSize.
Result<uint64_t> ReadHeaderLength(std::span<const uint8_t> prefix);
// The same, then checks that 8 + N fits in a file of `file_size` bytes (InvalidHeaderLength): checks 1-3,
// for every source that knows its size.
Result<uint64_t> ReadHeaderLength(std::span<const uint8_t> prefix, uint64_t file_size);

// The InvalidHeaderLength error for a header of `header_length` bytes in a file of `file_size` bytes.
Error InvalidHeaderLengthError(uint64_t header_length, uint64_t file_size);

// Parses and validates header JSON (exactly N bytes, the bytes after the prefix), following the
// reference reader's checks 4-6 in order (UTF-8, JSON schema, per-tensor offsets and sizes).
// When total_file_size is given, also checks coverage (check 7, MetadataIncompleteBuffer).
Result<Header> ParseHeader(std::string json, std::optional<uint64_t> total_file_size = std::nullopt);

// Random access over a complete file already in memory: all checks, including coverage.
Result<Header> ParseWholeFile(std::span<const uint8_t> file);

}  // namespace pb
