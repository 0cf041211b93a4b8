// A strict, SAX-style parser for the safetensors header JSON, writing compact records directly.
//
// It follows serde_json's grammar as the reference reader sees it (see docs/format.md, "Reading"): plain
// unsigned integers only, no raw control characters in strings, valid surrogate pairs, whitespace around the
// object allowed, unknown fields inside a tensor ignored (but still well-formed). One deliberate difference: any
// repeated key is rejected. A DOM is never built; a 20 MB header parses into records in one pass.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_set>
#include <cstring>
#include <numeric>

#include "core/header.h"
#include "core/content_kind.h"
#include "core/utf8.h"

namespace pb {

class HeaderBuilder {
 public:
  HeaderBuilder(Header& h, std::string json) : h_(h) {
    h_.header_size_ = json.size();
    h_.raw_ = std::move(json);
    text_ = h_.raw_;
  }

  Status Parse();
  Status Validate(std::optional<uint64_t> total_file_size);

 private:
  // A located syntax/schema error. `pos` is an index into the JSON text.
  Error Fail(size_t pos, const std::string& what) const {
    return MakeError(ErrorCode::InvalidHeaderDeserialization, what + " at header byte " + std::to_string(pos),
                     std::nullopt, 8 + pos);
  }
  Error FailTensor(size_t pos, std::string_view tensor, const std::string& what) const {
    return MakeError(ErrorCode::InvalidHeaderDeserialization,
                     what + " in tensor `" + std::string(tensor) + "` at header byte " + std::to_string(pos),
                     std::string(tensor), 8 + pos);
  }

  void SkipWhitespace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipWhitespace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string Describe() const {
    if (pos_ >= text_.size()) return "EOF while parsing";
    return std::string("unexpected character '") + Printable(text_[pos_]) + "'";
  }
  static std::string Printable(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) return std::string(1, c);
    char buf[8];
    snprintf(buf, sizeof buf, "\\x%02X", u);
    return buf;
  }

  // Parses a string at pos_ (which must be '"'). If it has no escapes, `raw` is set to a view of
  // the text and `decoded` stays empty; otherwise `decoded` holds the unescaped value.
  Status ParseString(size_t& raw_begin, size_t& raw_size, std::string& decoded, bool& escaped);
  Status ParseU64(uint64_t& out, std::string_view field, std::string_view tensor);
  // Containers open around a tensor field's value: the header object and the tensor object.
  static constexpr int kTensorFieldDepth = 2;
  static constexpr int kMaxContainerDepth = 127;
  Status SkipValue(int depth);
  // Checks a JSON number at pos_ and moves past it; `plain` says whether it had no fraction or exponent.
  Status SkipNumber(bool* plain = nullptr);
  Status ParseTensor(size_t name_begin, size_t name_size, const std::string& decoded, bool escaped);
  Status ParseMetadata();
  Status ParseU64Array(std::vector<uint64_t>& out, std::string_view field, std::string_view tensor);

  Header& h_;
  std::string_view text_;
  size_t pos_ = 0;
  bool seen_metadata_ = false;
  std::unordered_set<std::string> metadata_keys_;
  std::vector<uint64_t> scratch_dims_;
  std::vector<uint32_t> document_order_;  // record indices in document order (for stable sorting)
};

Status HeaderBuilder::ParseString(size_t& raw_begin, size_t& raw_size, std::string& decoded, bool& escaped) {
  // Precondition: text_[pos_] == '"'.
  ++pos_;
  raw_begin = pos_;
  escaped = false;
  decoded.clear();
  size_t run_start = pos_;
  while (true) {
    // Fast scan over ordinary bytes.
    while (pos_ < text_.size()) {
      unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"' || c == '\\' || c < 0x20) break;
      ++pos_;
    }
    if (pos_ >= text_.size()) return Fail(pos_, "EOF while parsing a string");
    unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c == '"') {
      if (escaped) decoded.append(text_.substr(run_start, pos_ - run_start));
      raw_size = pos_ - raw_begin;
      ++pos_;
      return Status::Ok();
    }
    if (c < 0x20)
      return Fail(pos_, "control character (\\u00" + std::string(1, "0123456789abcdef"[c >> 4]) +
                            std::string(1, "0123456789abcdef"[c & 15]) + ") while parsing a string");
    // Backslash escape.
    if (!escaped) {
      escaped = true;
    }
    decoded.append(text_.substr(run_start, pos_ - run_start));
    size_t esc_pos = pos_;
    ++pos_;
    if (pos_ >= text_.size()) return Fail(pos_, "EOF while parsing a string");
    char e = text_[pos_++];
    switch (e) {
      case '"': decoded.push_back('"'); break;
      case '\\': decoded.push_back('\\'); break;
      case '/': decoded.push_back('/'); break;
      case 'b': decoded.push_back('\b'); break;
      case 'f': decoded.push_back('\f'); break;
      case 'n': decoded.push_back('\n'); break;
      case 'r': decoded.push_back('\r'); break;
      case 't': decoded.push_back('\t'); break;
      case 'u': {
        auto hex4 = [&](uint32_t& v) -> bool {
          if (pos_ + 4 > text_.size()) return false;
          v = 0;
          for (int i = 0; i < 4; ++i) {
            char h = text_[pos_ + i];
            v <<= 4;
            if (h >= '0' && h <= '9') v |= h - '0';
            else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
            else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
            else return false;
          }
          pos_ += 4;
          return true;
        };
        uint32_t cp;
        if (!hex4(cp)) return Fail(esc_pos, "invalid escape");
        if (cp >= 0xDC00 && cp <= 0xDFFF) return Fail(esc_pos, "lone trailing surrogate in hex escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u')
            return Fail(esc_pos, "lone leading surrogate in hex escape");
          pos_ += 2;
          uint32_t lo;
          if (!hex4(lo)) return Fail(esc_pos, "invalid escape");
          if (lo < 0xDC00 || lo > 0xDFFF) return Fail(esc_pos, "lone leading surrogate in hex escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        AppendUtf8(decoded, cp);
        break;
      }
      default: return Fail(esc_pos, "invalid escape");
    }
    run_start = pos_;
  }
}

Status HeaderBuilder::SkipNumber(bool* plain) {
  // JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  size_t start = pos_;
  auto digit = [&](size_t p) { return p < text_.size() && text_[p] >= '0' && text_[p] <= '9'; };
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  if (!digit(pos_)) return Fail(start, "invalid number");
  if (text_[pos_] == '0') {
    ++pos_;
    if (digit(pos_)) return Fail(start, "invalid number");
  } else {
    while (digit(pos_)) ++pos_;
  }
  bool plain_integer = true;
  if (pos_ < text_.size() && text_[pos_] == '.') {
    plain_integer = false;
    ++pos_;
    if (!digit(pos_)) return Fail(start, "invalid number");
    while (digit(pos_)) ++pos_;
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    plain_integer = false;
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (!digit(pos_)) return Fail(start, "invalid number");
    while (digit(pos_)) ++pos_;
  }
  // serde_json parses every number it buffers: integers beyond 64 bits become doubles, and anything
  // beyond the double range is "number out of range".
  if (plain) *plain = plain_integer;
  std::string_view num = text_.substr(start, pos_ - start);
  if (!plain_integer || num.size() > 19) {
    double v = std::strtod(std::string(num).c_str(), nullptr);
    if (std::isinf(v)) return Fail(start, "number out of range");
  }
  return Status::Ok();
}

Status HeaderBuilder::SkipValue(int depth) {
  // `depth` counts the containers already open. serde_json allows 127 nested containers in all
  // (its budget of 128 fails when it reaches 0); so do we, which also bounds our stack.
  SkipWhitespace();
  if (pos_ < text_.size() && (text_[pos_] == '{' || text_[pos_] == '[') && depth + 1 > kMaxContainerDepth)
    return Fail(pos_, "recursion limit exceeded");
  if (pos_ >= text_.size()) return Fail(pos_, "EOF while parsing a value");
  char c = text_[pos_];
  size_t b, n;
  bool esc;
  std::string tmp;
  switch (c) {
    case '"': return ParseString(b, n, tmp, esc);
    case '{': {
      ++pos_;
      if (Consume('}')) return Status::Ok();
      std::unordered_set<std::string> keys;  // repeated keys are rejected at every level
      while (true) {
        SkipWhitespace();
        if (pos_ >= text_.size() || text_[pos_] != '"') return Fail(pos_, "key must be a string");
        size_t key_pos = pos_;
        PB_RETURN_IF_ERROR(ParseString(b, n, tmp, esc));
        std::string key = esc ? tmp : std::string(text_.substr(b, n));
        if (!keys.insert(key).second) return Fail(key_pos, "duplicate key `" + key + "`");
        if (!Consume(':')) return Fail(pos_, "expected ':'");
        PB_RETURN_IF_ERROR(SkipValue(depth + 1));
        if (Consume(',')) continue;
        if (Consume('}')) return Status::Ok();
        return Fail(pos_, "expected ',' or '}'");
      }
    }
    case '[': {
      ++pos_;
      if (Consume(']')) return Status::Ok();
      while (true) {
        PB_RETURN_IF_ERROR(SkipValue(depth + 1));
        if (Consume(',')) continue;
        if (Consume(']')) return Status::Ok();
        return Fail(pos_, "expected ',' or ']'");
      }
    }
    case 't':
      if (text_.substr(pos_, 4) == "true") {
        pos_ += 4;
        return Status::Ok();
      }
      return Fail(pos_, "expected value");
    case 'f':
      if (text_.substr(pos_, 5) == "false") {
        pos_ += 5;
        return Status::Ok();
      }
      return Fail(pos_, "expected value");
    case 'n':
      if (text_.substr(pos_, 4) == "null") {
        pos_ += 4;
        return Status::Ok();
      }
      return Fail(pos_, "expected value");
    default:
      if (c == '-' || (c >= '0' && c <= '9')) return SkipNumber();
      return Fail(pos_, "expected value");
  }
}

Status HeaderBuilder::ParseU64(uint64_t& out, std::string_view field, std::string_view tensor) {
  SkipWhitespace();
  size_t start = pos_;
  if (pos_ >= text_.size()) return Fail(pos_, "EOF while parsing a value");
  char c = text_[pos_];
  if (c == '-' || (c >= '0' && c <= '9')) {
    // Validate the full number first, then insist it is a plain unsigned integer that fits in u64
    // (serde_json reads anything else as a negative integer or a float: both rejected for usize).
    bool plain_integer;
    PB_RETURN_IF_ERROR(SkipNumber(&plain_integer));
    std::string_view num = text_.substr(start, pos_ - start);
    if (num[0] == '-')
      return FailTensor(
          start, tensor,
          "invalid value: integer `" + std::string(num) + "` in `" + std::string(field) + "`, expected usize");
    if (!plain_integer)
      return FailTensor(
          start, tensor,
          "invalid type: floating point `" + std::string(num) + "` in `" + std::string(field) + "`, expected usize");
    uint64_t v = 0;
    // Up to 19 digits always fit (10^19 - 1 < 2^64), so only longer numbers pay for the overflow check: its
    // 64-bit division has no multiply-high replacement in WebAssembly, and a 200,000-tensor header has ~10^6
    // numbers (docs/benchmarks.md, "Header-heavy inspect").
    const bool may_overflow = num.size() > 19;
    for (char d : num) {
      uint64_t digit = static_cast<uint64_t>(d - '0');
      if (may_overflow && v > (UINT64_MAX - digit) / 10)
        return FailTensor(start, tensor,
                          "number `" + std::string(num) + "` in `" + std::string(field) + "` does not fit in 64 bits");
      v = v * 10 + digit;
    }
    out = v;
    return Status::Ok();
  }
  return FailTensor(start, tensor, "invalid type in `" + std::string(field) + "`, expected usize");
}

Status HeaderBuilder::ParseU64Array(std::vector<uint64_t>& out, std::string_view field, std::string_view tensor) {
  out.clear();
  if (!Consume('['))
    return FailTensor(pos_, tensor, "invalid type in `" + std::string(field) + "`, expected a sequence");
  if (Consume(']')) return Status::Ok();
  while (true) {
    uint64_t v;
    PB_RETURN_IF_ERROR(ParseU64(v, field, tensor));
    out.push_back(v);
    if (Consume(',')) continue;
    if (Consume(']')) return Status::Ok();
    return Fail(pos_, "expected ',' or ']'");
  }
}

Status HeaderBuilder::ParseTensor(size_t name_begin, size_t name_size, const std::string& decoded, bool escaped) {
  Header::Record rec{};
  std::string_view name;
  if (escaped) {
    rec.name_decoded = true;
    rec.name_offset = static_cast<uint32_t>(h_.decoded_names_.size());
    rec.name_size = static_cast<uint32_t>(decoded.size());
    h_.decoded_names_.append(decoded);
    name = decoded;
  } else {
    rec.name_offset = static_cast<uint32_t>(name_begin);
    rec.name_size = static_cast<uint32_t>(name_size);
    name = text_.substr(name_begin, name_size);
  }
  size_t object_pos = pos_;
  if (!Consume('{')) {
    SkipWhitespace();
    return FailTensor(pos_, name, "invalid type, expected struct TensorInfo");
  }
  bool have_dtype = false, have_shape = false, have_offsets = false;
  std::unordered_set<std::string> other_fields;
  if (!Consume('}')) {
    while (true) {
      SkipWhitespace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Fail(pos_, "key must be a string");
      size_t key_pos = pos_;
      size_t kb, kn;
      bool kesc;
      std::string kdec;
      PB_RETURN_IF_ERROR(ParseString(kb, kn, kdec, kesc));
      std::string_view key = kesc ? std::string_view(kdec) : text_.substr(kb, kn);
      if (!Consume(':')) return Fail(pos_, "expected ':'");
      auto duplicate = [&] { return FailTensor(key_pos, name, "duplicate field `" + std::string(key) + "`"); };
      if (key == "dtype") {
        if (have_dtype) return duplicate();
        have_dtype = true;
        SkipWhitespace();
        size_t vpos = pos_;
        if (pos_ >= text_.size() || text_[pos_] != '"')
          return FailTensor(vpos, name, "invalid type in `dtype`, expected a dtype name");
        size_t vb, vn;
        bool vesc;
        std::string vdec;
        PB_RETURN_IF_ERROR(ParseString(vb, vn, vdec, vesc));
        std::string_view v = vesc ? std::string_view(vdec) : text_.substr(vb, vn);
        auto dt = ParseDtype(v);
        if (!dt) return FailTensor(vpos, name, "unknown dtype `" + std::string(v) + "`");
        rec.dtype_code = static_cast<uint32_t>(*dt) & 31u;
      } else if (key == "shape") {
        if (have_shape) return duplicate();
        have_shape = true;
        PB_RETURN_IF_ERROR(ParseU64Array(scratch_dims_, "shape", name));
        rec.shape_offset = static_cast<uint32_t>(h_.dims_.size());
        rec.rank = static_cast<uint32_t>(scratch_dims_.size());
        h_.dims_.insert(h_.dims_.end(), scratch_dims_.begin(), scratch_dims_.end());
      } else if (key == "data_offsets") {
        if (have_offsets) return duplicate();
        have_offsets = true;
        size_t apos = pos_;
        PB_RETURN_IF_ERROR(ParseU64Array(scratch_dims_, "data_offsets", name));
        if (scratch_dims_.size() != 2)
          return FailTensor(
              apos, name, "invalid length " + std::to_string(scratch_dims_.size()) + " for `data_offsets`, expected 2");
        rec.begin = scratch_dims_[0];
        rec.end = scratch_dims_[1];
      } else {
        // Unknown fields are ignored, as serde does, but must be well-formed and not repeated.
        if (!other_fields.insert(std::string(key)).second) return duplicate();
        PB_RETURN_IF_ERROR(SkipValue(kTensorFieldDepth));
      }
      if (Consume(',')) continue;
      if (Consume('}')) break;
      return Fail(pos_, "expected ',' or '}'");
    }
  }
  if (!have_dtype) return FailTensor(object_pos, name, "missing field `dtype`");
  if (!have_shape) return FailTensor(object_pos, name, "missing field `shape`");
  if (!have_offsets) return FailTensor(object_pos, name, "missing field `data_offsets`");
  h_.records_.push_back(rec);
  return Status::Ok();
}

Status HeaderBuilder::ParseMetadata() {
  SkipWhitespace();
  if (text_.substr(pos_, 4) == "null") {
    pos_ += 4;
    return Status::Ok();  // null metadata is the same as none
  }
  if (!Consume('{')) return Fail(pos_, "invalid type in `__metadata__`, expected a map of strings");
  h_.has_metadata_ = true;
  if (Consume('}')) return Status::Ok();
  while (true) {
    SkipWhitespace();
    if (pos_ >= text_.size() || text_[pos_] != '"') return Fail(pos_, "key must be a string");
    size_t key_pos = pos_;
    size_t b, n;
    bool esc;
    std::string dec;
    PB_RETURN_IF_ERROR(ParseString(b, n, dec, esc));
    std::string key = esc ? dec : std::string(text_.substr(b, n));
    if (!Consume(':')) return Fail(pos_, "expected ':'");
    SkipWhitespace();
    if (pos_ >= text_.size() || text_[pos_] != '"')
      return Fail(pos_, "invalid type in `__metadata__` value for `" + key + "`, expected a string");
    PB_RETURN_IF_ERROR(ParseString(b, n, dec, esc));
    if (!metadata_keys_.insert(key).second) return Fail(key_pos, "duplicate key `" + key + "` in `__metadata__`");
    h_.metadata_.emplace_back(std::move(key), esc ? dec : std::string(text_.substr(b, n)));
    if (Consume(',')) continue;
    if (Consume('}')) return Status::Ok();
    return Fail(pos_, "expected ',' or '}'");
  }
}

Status HeaderBuilder::Parse() {
  if (!IsValidUtf8(text_)) {
    size_t bad = FirstInvalidUtf8(text_);
    return MakeError(ErrorCode::InvalidHeader,
                     "header is not valid UTF-8 (invalid byte at header byte " + std::to_string(bad) + ")",
                     std::nullopt, 8 + bad);
  }
  SkipWhitespace();
  if (pos_ >= text_.size()) return Fail(pos_, "EOF while parsing a value");
  if (text_[pos_] != '{') return Fail(pos_, "invalid type: expected a JSON object");
  ++pos_;
  if (!Consume('}')) {
    while (true) {
      SkipWhitespace();
      if (pos_ >= text_.size()) return Fail(pos_, "EOF while parsing an object");
      if (text_[pos_] != '"') return Fail(pos_, "key must be a string");
      size_t key_pos = pos_;
      size_t b, n;
      bool esc;
      std::string dec;
      PB_RETURN_IF_ERROR(ParseString(b, n, dec, esc));
      if (!Consume(':')) return Fail(pos_, "expected ':'");
      std::string_view key = esc ? std::string_view(dec) : text_.substr(b, n);
      if (key == "__metadata__") {
        if (seen_metadata_) return Fail(key_pos, "duplicate field `__metadata__`");
        seen_metadata_ = true;
        PB_RETURN_IF_ERROR(ParseMetadata());
      } else {
        PB_RETURN_IF_ERROR(ParseTensor(b, n, dec, esc));
      }
      if (Consume(',')) continue;
      if (Consume('}')) break;
      SkipWhitespace();
      return Fail(pos_, pos_ >= text_.size() ? "EOF while parsing an object" : "expected ',' or '}'");
    }
  }
  SkipWhitespace();
  if (pos_ != text_.size()) return Fail(pos_, "trailing characters");

  // Repeated tensor names (project decision: rejected). The hash index also serves Header::Find.
  size_t slots = 16;
  while (slots < h_.records_.size() * 2) slots <<= 1;
  h_.name_slots_.assign(slots, Header::kEmptySlot);
  for (uint32_t i = 0; i < h_.records_.size(); ++i) {
    std::string_view name = h_.RecordName(h_.records_[i]);
    size_t slot = h_.SlotFor(name);
    if (h_.name_slots_[slot] != Header::kEmptySlot)
      return MakeError(ErrorCode::InvalidHeaderDeserialization, "duplicate tensor name `" + std::string(name) + "`",
                       std::string(name));
    h_.name_slots_[slot] = i;
  }
  return Status::Ok();
}

Status HeaderBuilder::Validate(std::optional<uint64_t> total_file_size) {
  auto& recs = h_.records_;
  // Data order: by (begin, end), ties kept in document order (stable).
  std::vector<uint32_t> order(recs.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (recs[a].begin != recs[b].begin) return recs[a].begin < recs[b].begin;
    return recs[a].end < recs[b].end;
  });
  uint64_t running = 0;
  for (uint32_t i : order) {
    const Header::Record& r = recs[i];
    const std::string_view name_view = h_.RecordName(r);
    auto name_str = [&] { return std::string(name_view); };
    if (r.begin != running || r.end < r.begin)
      return MakeError(ErrorCode::InvalidOffset,
                       "invalid offset for tensor `" + name_str() + "`: data_offsets [" + std::to_string(r.begin) +
                           ", " + std::to_string(r.end) + "] but the previous tensor ends at " +
                           std::to_string(running),
                       name_str(), h_.data_start() + r.begin);
    // Element count with checked multiplies, left to right, then x bits (checked), as the reference.
    uint64_t numel = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < r.rank; ++d) {
      if (__builtin_mul_overflow(numel, h_.dims_[r.shape_offset + d], &numel)) {
        overflow = true;
        break;
      }
    }
    uint64_t bits = 0;
    if (!overflow && __builtin_mul_overflow(numel, uint64_t{DtypeBits(r.dtype())}, &bits)) overflow = true;
    if (overflow)
      return MakeError(ErrorCode::ValidationOverflow,
                       "tensor `" + name_str() + "`: element count times dtype bits overflows 64 bits", name_str(),
                       h_.data_start() + r.begin);
    if (bits % 8 != 0)
      return MakeError(ErrorCode::MisalignedSlice,
                       "tensor `" + name_str() + "`: " + std::to_string(numel) + " elements of " +
                           std::string(DtypeName(r.dtype())) + " do not fill whole bytes",
                       name_str(), h_.data_start() + r.begin);
    if (r.end - r.begin != bits / 8)
      return MakeError(ErrorCode::TensorInvalidInfo,
                       "tensor `" + name_str() + "`: data_offsets span " + std::to_string(r.end - r.begin) +
                           " bytes but dtype and shape need " + std::to_string(bits / 8),
                       name_str(), h_.data_start() + r.begin);
    running = r.end;
  }
  h_.data_size_ = running;
  uint64_t file_size;
  if (__builtin_add_overflow(h_.data_start(), running, &file_size))
    return MakeError(ErrorCode::MetadataIncompleteBuffer,
                     "the header describes " + std::to_string(running) + " data bytes, more than any file can hold",
                     std::nullopt, h_.data_start());
  if (total_file_size && *total_file_size != file_size) {
    return MakeError(ErrorCode::MetadataIncompleteBuffer,
                     "file is " + std::to_string(*total_file_size) + " bytes but the header describes " +
                         std::to_string(h_.file_size()),
                     std::nullopt, std::min(*total_file_size, h_.file_size()));
  }
  // Store records in data order, in place (a 200,000-tensor header would otherwise hold two copies),
  // after remapping the name index to the new positions.
  std::vector<uint32_t> new_pos(recs.size());
  for (size_t k = 0; k < order.size(); ++k) new_pos[order[k]] = static_cast<uint32_t>(k);
  std::vector<uint32_t>().swap(order);
  for (uint32_t& v : h_.name_slots_)
    if (v != Header::kEmptySlot) v = new_pos[v];
  for (uint32_t i = 0; i < recs.size(); ++i) {
    while (new_pos[i] != i) {  // follow the cycle through i, placing one record per swap
      uint32_t j = new_pos[i];
      std::swap(recs[i], recs[j]);
      std::swap(new_pos[i], new_pos[j]);
    }
  }
  return Status::Ok();
}

Result<uint64_t> ReadHeaderLength(std::span<const uint8_t> prefix) {
  // A prefix that fails says what the file looks like first (JSON, a zip...), then what the check found.
  auto explained = [&](std::string detail) {
    std::string headline = ContentHeadline(ClassifyContent(prefix));
    return headline.empty() ? detail : headline + ": " + detail;
  };
  if (prefix.size() < 8)
    return MakeError(ErrorCode::HeaderTooSmall, explained("file is " + std::to_string(prefix.size()) +
                                                          " bytes, fewer than the 8-byte length prefix"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  if (n > kMaxHeaderSize)
    return MakeError(ErrorCode::HeaderTooLarge,
                     explained("header length " + std::to_string(n) + " exceeds the limit of " +
                               std::to_string(kMaxHeaderSize) + " bytes"),
                     std::nullopt, 0);
  return n;
}

Result<uint64_t> ReadHeaderLength(std::span<const uint8_t> prefix, uint64_t file_size) {
  auto n = ReadHeaderLength(prefix);
  if (n.ok() && file_size - 8 < n.value()) return InvalidHeaderLengthError(n.value(), file_size);
  return n;
}

Error InvalidHeaderLengthError(uint64_t header_length, uint64_t file_size) {
  return MakeError(ErrorCode::InvalidHeaderLength,
                   "header length " + std::to_string(header_length) + " runs past the end of the " +
                       std::to_string(file_size) + "-byte file",
                   std::nullopt, 0);
}

Result<Header> ParseHeader(std::string json, std::optional<uint64_t> total_file_size) {
  Header h;
  HeaderBuilder builder(h, std::move(json));
  PB_RETURN_IF_ERROR(builder.Parse());
  PB_RETURN_IF_ERROR(builder.Validate(total_file_size));
  return h;
}

Result<Header> ParseWholeFile(std::span<const uint8_t> file) {
  PB_ASSIGN_OR_RETURN(auto n, ReadHeaderLength(file, file.size()));
  std::string json(reinterpret_cast<const char*>(file.data()) + 8, n);
  return ParseHeader(std::move(json), file.size());
}

}  // namespace pb
