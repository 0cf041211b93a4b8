#include "core/reader.h"

#include <algorithm>
#include <cstring>

namespace pb {

Status StreamingReader::FailWith(Error error) {
  state_ = State::kFailed;
  error_ = std::move(error);
  return *error_;
}

uint64_t StreamingReader::bytes_until_header() const {
  switch (state_) {
    case State::kPrefix: return 8 - prefix_len_;
    case State::kHeader: return header_len_ - json_.size();
    default: return 0;
  }
}

Status StreamingReader::CompleteHeader(ReaderEvents& events) {
  auto parsed = ParseHeader(std::move(json_), options_.total_size);
  json_ = std::string();
  if (!parsed.ok()) return FailWith(parsed.error());
  header_.emplace(std::move(parsed.value()));
  state_ = State::kData;
  // Skip leading zero-size tensors so the cursor sits on the first tensor that owns bytes.
  while (tensor_cursor_ < header_->tensor_count() && header_->tensor(tensor_cursor_).byte_length() == 0)
    ++tensor_cursor_;
  if (Status s = events.OnHeader(*header_); !s.ok()) return FailWith(s.error());
  return Status::Ok();
}

Status StreamingReader::Feed(std::span<const uint8_t> chunk, ReaderEvents& events) {
  if (state_ == State::kFailed) return *error_;
  if (state_ == State::kDone) return FailWith(MakeError(ErrorCode::InvalidArgument, "Feed called after Finish"));
  const uint64_t chunk_start = fed_;
  fed_ += chunk.size();
  size_t i = 0;
  if (state_ == State::kPrefix) {
    size_t take = std::min(chunk.size(), 8 - prefix_len_);
    std::memcpy(prefix_ + prefix_len_, chunk.data(), take);
    prefix_len_ += take;
    i += take;
    if (prefix_len_ < 8) return Status::Ok();
    std::span<const uint8_t> prefix(prefix_, 8);
    auto n = options_.total_size ? ReadHeaderLength(prefix, *options_.total_size) : ReadHeaderLength(prefix);
    if (!n.ok()) return FailWith(n.error());
    header_len_ = n.value();
    // The prefix is untrusted: unless the source's size vouches for N (checked above), don't reserve
    // N up front (a 100 MB claim would cost 100 MB before a single header byte arrived). Start small
    // and grow with the bytes that actually come.
    json_.reserve(static_cast<size_t>(options_.total_size ? header_len_ : std::min<uint64_t>(header_len_, 64 * 1024)));
    state_ = State::kHeader;
  }
  if (state_ == State::kHeader) {
    size_t take = static_cast<size_t>(std::min<uint64_t>(chunk.size() - i, header_len_ - json_.size()));
    if (json_.size() + take > json_.capacity()) {
      // Geometric growth, but never beyond N, so the final buffer is at most N bytes.
      size_t want = std::max(json_.capacity() * 2, json_.size() + take);
      json_.reserve(static_cast<size_t>(std::min<uint64_t>(want, header_len_)));
    }
    json_.append(reinterpret_cast<const char*>(chunk.data()) + i, take);
    i += take;
    if (json_.size() < header_len_) return Status::Ok();
    PB_RETURN_IF_ERROR(CompleteHeader(events));
  }
  // Data region: split the rest of the chunk at tensor boundaries.
  const Header& h = *header_;
  while (i < chunk.size()) {
    if (data_pos_ >= h.data_size()) {
      return FailWith(MakeError(ErrorCode::MetadataIncompleteBuffer,
                                "trailing bytes after the last tensor: the header describes a " +
                                    std::to_string(h.file_size()) + "-byte file",
                                std::nullopt, chunk_start + i));
    }
    TensorInfo t = h.tensor(tensor_cursor_);
    uint64_t in_tensor = data_pos_ - t.begin;
    size_t take = static_cast<size_t>(std::min<uint64_t>(chunk.size() - i, t.end - data_pos_));
    if (Status s = events.OnTensorData(tensor_cursor_, in_tensor, chunk.subspan(i, take)); !s.ok())
      return FailWith(s.error());
    i += take;
    data_pos_ += take;
    while (tensor_cursor_ < h.tensor_count() && h.tensor(tensor_cursor_).end <= data_pos_) ++tensor_cursor_;
  }
  return Status::Ok();
}

Status StreamingReader::Skip(uint64_t n) {
  if (state_ == State::kFailed) return *error_;
  if (state_ != State::kData) return FailWith(MakeError(ErrorCode::InvalidArgument, "Skip before the header"));
  const Header& h = *header_;
  if (n > h.data_size() - data_pos_)
    return FailWith(MakeError(ErrorCode::InvalidArgument, "Skip past the last tensor", std::nullopt, fed_));
  fed_ += n;
  data_pos_ += n;
  while (tensor_cursor_ < h.tensor_count() && h.tensor(tensor_cursor_).end <= data_pos_) ++tensor_cursor_;
  return Status::Ok();
}

Status StreamingReader::Finish(ReaderEvents& events) {
  (void)events;
  switch (state_) {
    case State::kFailed: return *error_;
    case State::kDone: return Status::Ok();
    case State::kPrefix:
      // Same error as the whole-file path, so every front end reports a short file identically.
      return FailWith(ReadHeaderLength(std::span<const uint8_t>(prefix_, prefix_len_)).error());
    case State::kHeader: return FailWith(InvalidHeaderLengthError(header_len_, fed_));
    case State::kData:
      if (data_pos_ != header_->data_size()) {
        std::optional<std::string> tensor;
        if (tensor_cursor_ < header_->tensor_count()) tensor = std::string(header_->tensor(tensor_cursor_).name);
        return FailWith(MakeError(ErrorCode::MetadataIncompleteBuffer,
                                  "stream ended after " + std::to_string(fed_) + " bytes but the header describes " +
                                      std::to_string(header_->file_size()) +
                                      (tensor ? " (truncated inside tensor `" + *tensor + "`)" : std::string()),
                                  tensor, fed_));
      }
      state_ = State::kDone;
      return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace pb
