// The base of the handles that read files by range (merge_bindings.cc's Merger and StreamMerger,
// combine_bindings.cc's CombineJob, create_bindings.cc's AdapterCreator, extract_bindings.cc's ExtractJob,
// cache_bindings.cc's ServedAdapter): a header from a file's first bytes, checked as the native CLI checks it, and
// the steps JS drives to read an adapter's header (header_length, set_adapter_header, then the tiny tensors
// adapter_inline_ranges() lists). Registered once, as "HeaderReadingHandle", in merge_bindings.cc.
#pragma once

#include <emscripten/val.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "adapter/adapter_io.h"
#include "adapter/tensor_fetch.h"
#include "core/header.h"
#include "gguf/gguf_reader.h"
#include "handle.h"

namespace pb::wasm {

// A safetensors header (a base shard's or an adapter's) from its file's first bytes (the 8-byte length and the
// JSON), checked as the native CLI checks it; a known file size bounds the data the header may declare.
inline Result<Header> HeaderFrom(std::span<const uint8_t> bytes, std::optional<uint64_t> file_size) {
  auto len = file_size ? ReadHeaderLength(bytes, *file_size) : ReadHeaderLength(bytes);
  if (!len.ok()) return len.error();
  if (bytes.size() - 8 < len.value()) return InvalidHeaderLengthError(len.value(), bytes.size());
  return ParseHeader(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, len.value()), file_size);
}

// A Handle (the byte window, output chunks, the error) that reads headers by range: JS reads a file's first 8 bytes
// (header_length), then the 8-byte prefix and the header (set_adapter_header), then the tiny tensors
// adapter_inline_ranges() lists. Named apart from bindings.cc's Handle: Embind registers each class once.
class HeaderReadingHandle : public Handle {
 public:
  // A header's length from the first n (<= 8) window bytes, or -1 (error set, prefixed with the file's name as
  // the CLI does). `file_size` < 0 when unknown.
  double header_length(size_t n, const std::string& name, double file_size) {
    auto bytes = Begin(n);
    if (!bytes) return -1;
    auto len = KnownSize(file_size) ? ReadHeaderLength(*bytes, uint64_t(file_size)) : ReadHeaderLength(*bytes);
    if (!len.ok()) return FailNamed(name, len.error()), -1;
    return double(len.value());
  }
  // The adapter's: as header_length, except that a .gguf adapter (by its magic) gives the count of bytes after the
  // first 8 to read first (gguf::kFirstReadBytes, or the file's size); then set_adapter_header may ask for more
  // (adapter_header_need()).
  double adapter_header_length(size_t n, const std::string& name, double file_size) {
    auto bytes = Begin(n);
    if (!bytes) return -1;
    if (gguf::LooksLikeGguf(*bytes)) {
      const uint64_t first = KnownSize(file_size) ? std::min<uint64_t>(uint64_t(file_size), gguf::kFirstReadBytes)
                                                  : gguf::kFirstReadBytes;
      if (first < 8) {  // too short for a header: the parse says why
        auto parse = gguf::ParseGgufHeader(*bytes, KnownSize(file_size));
        if (!parse.ok()) return FailNamed(name, parse.error()), -1;
      }
      return double(std::max<uint64_t>(first, 8) - 8);
    }
    return header_length(n, name, file_size);
  }
  // The adapter's header from the file's first n bytes. A .gguf adapter whose header goes on past them returns
  // false with no error and adapter_header_need() > 0: read that many bytes from the start and call again.
  bool set_adapter_header(size_t n, const std::string& weights_name, double file_size) {
    auto bytes = Begin(n);
    if (!bytes) return false;
    adapter_need_ = 0;
    adapter_gguf_.reset();
    if (gguf::LooksLikeGguf(*bytes)) {
      auto parse = gguf::ParseGgufHeader(*bytes, KnownSize(file_size));
      if (!parse.ok()) return FailNamed(weights_name, parse.error());
      if (!parse->file) {
        adapter_need_ = parse->need;
        return false;
      }
      adapter_gguf_ = std::make_unique<gguf::GgufFile>(std::move(*parse->file));
      adapter_header_ = std::make_unique<Header>();  // unused: the reader takes adapter_gguf_
      return true;
    }
    auto header = HeaderFrom(*bytes, KnownSize(file_size));
    if (!header.ok()) return FailNamed(weights_name, header.error());
    adapter_header_ = std::make_unique<Header>(std::move(header.value()));
    return true;
  }
  double adapter_header_need() const { return double(adapter_need_); }
  std::string adapter_inline_ranges() const {
    return adapter_header_ && !adapter_gguf_ ? RangesJson(adapter::InlineTensorRanges(*adapter_header_)) : "[]";
  }

 protected:
  static std::string RangesJson(std::span<const adapter::ByteRange> ranges) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : ranges) j.push_back({r.begin, r.end});
    return j.dump();
  }

  std::unique_ptr<Header> adapter_header_;        // the adapter's header, until the adapter is read from it
  std::unique_ptr<gguf::GgufFile> adapter_gguf_;  // a .gguf adapter's header (adapter_header_ then empty)
  uint64_t adapter_need_ = 0;
};

inline std::optional<std::string> OptionalText(const emscripten::val& v) {
  if (v.isNull() || v.isUndefined()) return std::nullopt;
  return v.as<std::string>();
}

// An adapter output's files as a result's fields: weightsName, and config: {name, bytes (a copy)} or null.
inline void SetOutputFiles(emscripten::val& r, const adapter::AdapterOutput& out) {
  r.set("weightsName", out.weights_name);
  if (!out.config_name) {
    r.set("config", emscripten::val::null());
    return;
  }
  emscripten::val c = emscripten::val::object();
  c.set("name", *out.config_name);
  c.set("bytes", emscripten::val::global("Uint8Array")
                     .new_(emscripten::typed_memory_view(out.config_text.size(),
                                                         reinterpret_cast<const uint8_t*>(out.config_text.data()))));
  r.set("config", c);
}

}  // namespace pb::wasm
