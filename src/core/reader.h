// StreamingReader: a push parser for safetensors. Feed it chunks of any size (1 byte to gigabytes);
// it reports the header first, then the tensor bytes as (tensor, offset within tensor, bytes) spans
// in file order, without buffering them. Only the header JSON is ever held.
//
//   StreamingReader reader;            // optionally ReaderOptions{.total_size = file size}
//   reader.Feed(chunk, events) ...     // any number of times
//   reader.Finish(events)              // checks that exactly the described bytes arrived
//
// Errors are sticky: after the first failure every call returns it again. The error codes and their
// precedence are the reference reader's (see error.h), because all header checks run as soon as the
// header is complete, before any tensor byte is reported.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/header.h"

namespace pb {

class ReaderEvents {
 public:
  virtual ~ReaderEvents() = default;
  virtual Status OnHeader(const Header& header) = 0;
  // `tensor` indexes header.tensor(i) (data order). Spans never cross a tensor boundary and are only
  // valid during the call. Zero-size tensors produce no spans. Guarantee: every span is a subspan of
  // the chunk passed to the Feed call that reports it (tensor bytes are never copied), so an edge may
  // locate a span by its position in that chunk.
  virtual Status OnTensorData(size_t tensor, uint64_t offset_in_tensor, std::span<const uint8_t> bytes) = 0;
};

struct ReaderOptions {
  // The whole file's size, when the source knows it (a file, a Content-Range). Lets the reader report
  // InvalidHeaderLength and MetadataIncompleteBuffer as soon as the header is read.
  std::optional<uint64_t> total_size;
};

class StreamingReader {
 public:
  explicit StreamingReader(ReaderOptions options = {}) : options_(options) {}

  Status Feed(std::span<const uint8_t> chunk, ReaderEvents& events);
  Status Finish(ReaderEvents& events);
  // Once the header is in: the next n data bytes go by without being fed (an edge forwarded them elsewhere
  // itself); no events fire for them. Fails past the data's end.
  Status Skip(uint64_t n);

  // Available once the header event has fired.
  const Header* header() const { return header_ ? &*header_ : nullptr; }
  bool header_done() const { return header_.has_value(); }
  uint64_t bytes_fed() const { return fed_; }
  // How many more bytes the reader needs before it can report the header (0 once it has).
  uint64_t bytes_until_header() const;

 private:
  enum class State { kPrefix, kHeader, kData, kDone, kFailed };
  Status FailWith(Error error);
  Status CompleteHeader(ReaderEvents& events);

  ReaderOptions options_;
  State state_ = State::kPrefix;
  uint8_t prefix_[8] = {};
  size_t prefix_len_ = 0;
  uint64_t header_len_ = 0;
  std::string json_;
  std::optional<Header> header_;
  uint64_t fed_ = 0;
  uint64_t data_pos_ = 0;     // bytes of the data region consumed
  size_t tensor_cursor_ = 0;  // first tensor whose end is beyond data_pos_
  std::optional<Error> error_;
};

}  // namespace pb
