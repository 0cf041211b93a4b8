// Errors carry a code, a message and, where one applies, the tensor name and a byte offset.
// The first ten codes are the reference Rust reader's `SafeTensorError` variants, with its names;
// the ones after them belong to peft-bridge's own operations.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pb {

// The one table of error codes: the enum, ErrorCodeName, the WASM module's errorCodes() and (checked by
// tests/js/error-codes.test.mjs) the SafetensorsErrorCode union of web/src/index.d.ts all come from it.
// X(name, what it means)
#define PB_ERROR_CODES(X)                                                                                        \
  /* Reader validation: the reference Rust reader's SafeTensorError variants, in its order of precedence. */     \
  X(HeaderTooSmall, "the file is shorter than the 8-byte header length")                                         \
  X(HeaderTooLarge, "the header length exceeds the 100 MB limit")                                                \
  X(InvalidHeaderLength, "the header length points past the end of the file")                                    \
  X(InvalidHeader, "the header is not valid UTF-8 or does not start with '{'")                                   \
  X(InvalidHeaderDeserialization, "the header is not the JSON safetensors defines")                              \
  X(InvalidOffset, "tensor data offsets are not contiguous from 0 or do not cover the data")                     \
  X(ValidationOverflow, "a size computation overflows")                                                          \
  X(MisalignedSlice, "a tensor's byte length does not match its dtype and shape")                                \
  X(TensorInvalidInfo, "a tensor's dtype or shape is invalid")                                                   \
  X(MetadataIncompleteBuffer, "the file ends before the data the header declares")                               \
  /* Beyond the reader. */                                                                                       \
  X(InvalidArgument, "a caller passed something unusable (bad option, wrong byte count...)")                     \
  X(UnsupportedDtype, "a conversion between dtypes that has no defined meaning")                                 \
  X(IoError, "file, stream or network failure at an edge (never raised by the sans-I/O core)")                   \
  X(OutOfMemory, "a working buffer could not be allocated (the kernels report it instead of aborting)")          \
  /* Adapters (src/adapter). */                                                                                  \
  X(InvalidConfig, "adapter_config.json (or another JSON input) is malformed or inconsistent")                   \
  X(UnsupportedAdapter, "a valid adapter whose meaning peft-bridge cannot reproduce (type, init mode, variant)") \
  X(UnresolvedTensor, "a tensor that maps to nothing (an error under --strict, a report line otherwise)")        \
  X(ShapeMismatch, "tensors whose shapes contradict each other or the config")                                   \
  /* Merging (src/merge). */                                                                                     \
  X(ModulesNotFound, "adapter modules the base model does not have (most often: the adapter of another model)")  \
  X(UnsupportedBase, "a base model the merge cannot change as asked (a targeted weight that is quantized...)")   \
  /* Serving (src/compose/lora_serving.h). */                                                                    \
  X(LimitExceeded, "a request beyond a configured bound (a composition's rank or size, a cache's registrations)")

enum class ErrorCode : uint8_t {
#define PB_ERROR_CODE_ENUM(name, what) name,
  PB_ERROR_CODES(PB_ERROR_CODE_ENUM)
#undef PB_ERROR_CODE_ENUM
};

std::string_view ErrorCodeName(ErrorCode code);
// Every code's name, in the table's order.
std::span<const std::string_view> ErrorCodeNames();
// The code of that name, if there is one.
std::optional<ErrorCode> ErrorCodeFromName(std::string_view name);

// One of several problems an error reports together (a merge plan lists every base/adapter mismatch): its own
// code, the adapter module (or tensor key) concerned, and one line saying what is wrong.
struct Problem {
  ErrorCode code;
  std::optional<std::string> module;
  std::string message;
};

struct Error {
  ErrorCode code;
  std::string message;
  std::optional<std::string> tensor;   // the tensor concerned, if any
  std::optional<uint64_t> offset;      // absolute byte offset in the file, if any
  std::vector<Problem> problems = {};  // every problem, when the message summarises several (then uncapped)
};

// A success-or-Error value. Functions return Status instead of throwing so the core behaves the same
// natively and in WASM (which is built without C++ exceptions).
class [[nodiscard]] Status {
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

// Returns the error of a Status- or Result-valued expression from the enclosing function, which returns Status
// or a Result: `PB_RETURN_IF_ERROR(writer.Write(bytes));`
#define PB_RETURN_IF_ERROR(expr)                                               \
  do {                                                                         \
    if (auto pb_status_ = (expr); !pb_status_.ok()) return pb_status_.error(); \
  } while (0)

#define PB_CONCAT_INNER_(a, b) a##b
#define PB_CONCAT_(a, b) PB_CONCAT_INNER_(a, b)
// Declares `lhs` from a Result-valued expression, or returns its error: `PB_ASSIGN_OR_RETURN(auto header, Parse(x));`
#define PB_ASSIGN_OR_RETURN(lhs, expr)                                                         \
  auto PB_CONCAT_(pb_result_, __LINE__) = (expr);                                              \
  if (!PB_CONCAT_(pb_result_, __LINE__).ok()) return PB_CONCAT_(pb_result_, __LINE__).error(); \
  lhs = std::move(PB_CONCAT_(pb_result_, __LINE__).value())
