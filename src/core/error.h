// Errors carry a code, a message and, where one applies, the tensor name and a byte offset.
// The first ten codes are the reference Rust reader's `SafeTensorError` variants, with its names;
// the ones after them belong to peft-bridge's own operations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace pb {

enum class ErrorCode : uint8_t {
  // Reader validation, in the reference's order of precedence.
  HeaderTooSmall,
  HeaderTooLarge,
  InvalidHeaderLength,
  InvalidHeader,
  InvalidHeaderDeserialization,
  InvalidOffset,
  ValidationOverflow,
  MisalignedSlice,
  TensorInvalidInfo,
  MetadataIncompleteBuffer,
  // Beyond the reader.
  InvalidArgument,    // a caller passed something unusable (bad option, wrong byte count…)
  UnsupportedDtype,   // a conversion between dtypes that has no defined meaning
  IoError,            // file or stream failure at an edge (never raised by the sans-I/O core)
  // Adapters (src/adapter).
  InvalidConfig,       // adapter_config.json (or another tool's config) is malformed or inconsistent
  UnsupportedAdapter,  // a valid adapter whose meaning peft-bridge cannot reproduce (type, init mode, variant)
  UnresolvedTensor,    // a tensor that maps to nothing (an error under --strict, a report line otherwise)
  ShapeMismatch,       // tensors whose shapes contradict each other or the config
};

std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
  std::optional<std::string> tensor;  // the tensor concerned, if any
  std::optional<uint64_t> offset;     // absolute byte offset in the file, if any
};

// A success-or-Error value. Functions return Status instead of throwing so the core behaves the same
// natively and in WASM (which is built without C++ exceptions).
class Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  static Status Ok() { return {}; }
  bool ok() const { return !error_.has_value(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

Error MakeError(ErrorCode code, std::string message, std::optional<std::string> tensor = std::nullopt,
                std::optional<uint64_t> offset = std::nullopt);

}  // namespace pb
