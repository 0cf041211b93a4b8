#include "gguf/gguf_reader.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

namespace pb::gguf {

namespace {

// gguf-py's GGML_QUANT_SIZES (gguf-py/gguf/constants.py), by ggml_type id; {} where ggml has no type.
constexpr GgmlTypeTraits kTypes[kGgmlTypeCount] = {
    {"F32", 1, 4},
    {"F16", 1, 2},
    {"Q4_0", 32, 18},
    {"Q4_1", 32, 20},
    {},
    {},
    {"Q5_0", 32, 22},
    {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},
    {"Q8_1", 32, 36},
    {"Q2_K", 256, 84},
    {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},
    {"Q5_K", 256, 176},
    {"Q6_K", 256, 210},
    {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66},
    {"IQ2_XS", 256, 74},
    {"IQ3_XXS", 256, 98},
    {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},
    {"IQ3_S", 256, 110},
    {"IQ2_S", 256, 82},
    {"IQ4_XS", 256, 136},
    {"I8", 1, 1},
    {"I16", 1, 2},
    {"I32", 1, 4},
    {"I64", 1, 8},
    {"F64", 1, 8},
    {"IQ1_M", 256, 56},
    {"BF16", 1, 2},
    {},
    {},
    {},
    {"TQ1_0", 256, 54},
    {"TQ2_0", 256, 66},
    {},
    {},
    {},
    {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},
    {"Q1_0", 128, 18},
    {"Q2_0", 64, 18},
};

}  // namespace

std::string Quote(std::string_view s) {
  // Names in messages: printable ASCII kept, other bytes as \xNN, so a hostile name cannot garble a terminal.
  std::string out = "`";
  for (unsigned char c : s.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > 200) out += "...";
  return out + "`";
}

namespace {

// A cursor over the prefix. A read past the prefix records how many bytes the parse needs (`need`), or an
// error when the file (or kMaxHeaderBytes) ends first.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> data, std::optional<uint64_t> file_size) : data_(data), file_size_(file_size) {}
  uint64_t pos() const { return pos_; }
  bool failed() const { return error_.has_value() || need_ != 0; }
  uint64_t need() const { return need_; }
  const std::optional<Error>& error() const { return error_; }
  void Fail(Error e) {
    if (!failed()) error_ = std::move(e);
  }
  // Makes sure `n` more bytes are present; `what` names them for the message when the file ends first.
  bool Have(uint64_t n, const std::string& what) {
    if (failed()) return false;
    if (n > UINT64_MAX - pos_ || pos_ + n > kMaxHeaderBytes) {
      Fail(MakeError(ErrorCode::HeaderTooLarge,
                     "GGUF: " + what + " at byte " + std::to_string(pos_) + " claims " + std::to_string(n) +
                         " bytes, beyond the " + std::to_string(kMaxHeaderBytes) + "-byte limit on a header",
                     std::nullopt, pos_));
      return false;
    }
    const uint64_t end = pos_ + n;
    if (file_size_ && end > *file_size_) {
      Fail(MakeError(ErrorCode::MetadataIncompleteBuffer,
                     "GGUF: the file ends at byte " + std::to_string(*file_size_) + ", inside " + what + " (at byte " +
                         std::to_string(pos_) + ", " + std::to_string(n) + " bytes)",
                     std::nullopt, pos_));
      return false;
    }
    if (end > data_.size()) {
      // Ask for at least twice what we have, so a long header is read in few rounds.
      uint64_t want = std::max<uint64_t>(end, std::min<uint64_t>(kMaxHeaderBytes, 2 * data_.size()));
      if (file_size_) want = std::min(want, *file_size_);
      need_ = std::max(want, end);
      return false;
    }
    return true;
  }
  template <typename T>
  bool Read(T& out, const std::string& what) {
    if (!Have(sizeof(T), what)) return false;
    std::memcpy(&out, data_.data() + pos_, sizeof(T));  // little-endian hosts only (native x86-64/arm64, WASM)
    pos_ += sizeof(T);
    return true;
  }
  bool ReadBytes(uint64_t n, std::string* out, std::vector<uint8_t>* raw, const std::string& what) {
    if (!Have(n, what)) return false;
    const uint8_t* p = data_.data() + pos_;
    if (out) out->assign(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    if (raw) raw->insert(raw->end(), p, p + n);
    pos_ += n;
    return true;
  }
  bool ReadString(std::string* out, const std::string& what) {
    uint64_t n = 0;
    if (!Read(n, what + "'s length")) return false;
    return ReadBytes(n, out, nullptr, what);
  }

 private:
  std::span<const uint8_t> data_;
  std::optional<uint64_t> file_size_;
  uint64_t pos_ = 0;
  uint64_t need_ = 0;
  std::optional<Error> error_;
};

constexpr uint64_t kMaxKeys = 1 << 16;
constexpr uint64_t kMaxTensors = 1 << 18;

Error Bad(ErrorCode code, std::string message, uint64_t offset, std::optional<std::string> tensor = std::nullopt) {
  return MakeError(code, "GGUF: " + message, std::move(tensor), offset);
}

bool ReadKey(Cursor& c, uint64_t index, GgufKey& kv) {
  kv.offset = c.pos();
  const std::string what = "key " + std::to_string(index);
  if (!c.ReadString(&kv.key, what)) return false;
  if (kv.key.empty()) {
    c.Fail(Bad(ErrorCode::InvalidHeader, "key " + std::to_string(index) + " is empty", kv.offset));
    return false;
  }
  const std::string named = "key " + Quote(kv.key);
  uint32_t type = 0;
  const uint64_t type_at = c.pos();
  if (!c.Read(type, named + "'s type")) return false;
  uint32_t element = type;
  if (type == static_cast<uint32_t>(ValueType::kArray)) {
    if (!c.Read(element, named + "'s element type") || !c.Read(kv.count, named + "'s element count")) return false;
    if (element == static_cast<uint32_t>(ValueType::kArray) || element >= kValueTypeCount) {
      c.Fail(Bad(
          ErrorCode::InvalidHeader,
          named + " is an array of invalid GGUF type " + std::to_string(element) +
              (element == static_cast<uint32_t>(ValueType::kArray) ? " (arrays of arrays are not read by ggml)" : ""),
          type_at));
      return false;
    }
  } else if (type >= kValueTypeCount) {
    c.Fail(Bad(ErrorCode::InvalidHeader, named + " has invalid GGUF type " + std::to_string(type), type_at));
    return false;
  }
  kv.type = static_cast<ValueType>(type);
  kv.element_type = static_cast<ValueType>(element);
  const uint32_t size = ValueTypeSize(kv.element_type);
  if (kv.type != ValueType::kArray) {
    if (kv.type == ValueType::kString) return c.ReadString(&kv.text, named + "'s value");
    return c.ReadBytes(size, nullptr, &kv.raw, named + "'s value");
  }
  if (size != 0) {
    if (kv.count > UINT64_MAX / size) {
      c.Fail(
          Bad(ErrorCode::ValidationOverflow, named + "'s " + std::to_string(kv.count) + " elements overflow", type_at));
      return false;
    }
    // Have() first: a hostile count is refused before anything is allocated for it.
    return c.Have(kv.count * size, named + "'s elements") && c.ReadBytes(kv.count * size, nullptr, &kv.raw, named);
  }
  // Strings: each takes at least its 8-byte length, so the count is bounded by the bytes before it is looped on.
  if (kv.count > UINT64_MAX / 8 || !c.Have(kv.count * 8, named + "'s elements")) {
    if (!c.failed())
      c.Fail(
          Bad(ErrorCode::ValidationOverflow, named + "'s " + std::to_string(kv.count) + " elements overflow", type_at));
    return false;
  }
  for (uint64_t i = 0; i < kv.count; ++i)
    if (!c.ReadString(nullptr, named + "'s element " + std::to_string(i))) return false;
  return true;
}

bool ReadTensorInfo(Cursor& c, uint64_t index, GgufTensorInfo& t) {
  t.info_offset = c.pos();
  if (!c.ReadString(&t.name, "tensor info " + std::to_string(index) + "'s name")) return false;
  const std::string named = "tensor " + Quote(t.name);
  if (t.name.size() > kMaxNameBytes) {
    c.Fail(Bad(ErrorCode::TensorInvalidInfo,
               named + " (tensor " + std::to_string(index) + "): its name has " + std::to_string(t.name.size()) +
                   " bytes; ggml reads at most " + std::to_string(kMaxNameBytes),
               t.info_offset, t.name));
    return false;
  }
  uint32_t n_dims = 0;
  const uint64_t dims_at = c.pos();
  if (!c.Read(n_dims, named + "'s dimension count")) return false;
  if (n_dims > kMaxDims) {
    c.Fail(
        Bad(ErrorCode::TensorInvalidInfo,
            named + " has " + std::to_string(n_dims) + " dimensions; ggml allows at most " + std::to_string(kMaxDims),
            dims_at, t.name));
    return false;
  }
  uint64_t elements = 1;
  bool overflow = false;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne = 0;
    const uint64_t at = c.pos();
    if (!c.Read(ne, named + "'s dimension " + std::to_string(d))) return false;
    if (ne > static_cast<uint64_t>(INT64_MAX)) {
      c.Fail(Bad(ErrorCode::TensorInvalidInfo,
                 named + " dimension " + std::to_string(d) + " has a negative number of elements (" +
                     std::to_string(static_cast<int64_t>(ne)) + ")",
                 at, t.name));
      return false;
    }
    t.ne.push_back(ne);
    if (ne > 1 && elements > static_cast<uint64_t>(INT64_MAX) / ne) overflow = true;
    else if (!overflow) elements *= ne;
  }
  if (overflow) {
    c.Fail(Bad(ErrorCode::ValidationOverflow, named + "'s element count overflows int64", dims_at, t.name));
    return false;
  }
  const uint64_t type_at = c.pos();
  if (!c.Read(t.type, named + "'s type")) return false;
  auto traits = GgmlType(t.type);
  if (!traits) {
    c.Fail(Bad(ErrorCode::TensorInvalidInfo,
               named + " has invalid ggml type " + std::to_string(t.type) + " (not a type ggml defines)", type_at,
               t.name));
    return false;
  }
  const uint64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
  if (ne0 % traits->block_elements != 0) {
    c.Fail(Bad(ErrorCode::MisalignedSlice,
               named + " of type " + std::string(traits->name) + " has " + std::to_string(ne0) +
                   " elements per row, not a multiple of its block size (" + std::to_string(traits->block_elements) +
                   ")",
               type_at, t.name));
    return false;
  }
  const uint64_t blocks = elements / traits->block_elements;  // elements < 2^63, no overflow below
  if (blocks > UINT64_MAX / traits->block_bytes) {
    c.Fail(Bad(ErrorCode::ValidationOverflow, named + "'s size in bytes overflows", type_at, t.name));
    return false;
  }
  t.size = blocks * traits->block_bytes;
  return c.Read(t.offset, named + "'s offset");
}

}  // namespace

std::optional<GgmlTypeTraits> GgmlType(uint32_t id) {
  if (id >= kGgmlTypeCount || kTypes[id].block_elements == 0) return std::nullopt;
  return kTypes[id];
}

std::optional<double> GgufKey::Number() const {
  auto get = [&](auto v) {
    std::memcpy(&v, raw.data(), sizeof(v));
    return static_cast<double>(v);
  };
  if (type == ValueType::kArray || type == ValueType::kString || raw.size() != ValueTypeSize(type)) return std::nullopt;
  switch (type) {
    case ValueType::kUint8: return get(uint8_t{});
    case ValueType::kInt8: return get(int8_t{});
    case ValueType::kUint16: return get(uint16_t{});
    case ValueType::kInt16: return get(int16_t{});
    case ValueType::kUint32: return get(uint32_t{});
    case ValueType::kInt32: return get(int32_t{});
    case ValueType::kFloat32: return get(float{});
    case ValueType::kBool: return raw[0] != 0 ? 1.0 : 0.0;
    case ValueType::kUint64: return get(uint64_t{});
    case ValueType::kInt64: return get(int64_t{});
    case ValueType::kFloat64: return get(double{});
    default: return std::nullopt;
  }
}

namespace {

// The shortest "%.Ng" text that reads back as `v` (Emscripten 3.1.6's libc++ has no floating-point to_chars).
template <typename F>
std::string ShortestText(F v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
    if (static_cast<F>(std::strtod(buf, nullptr)) == v || v != v) break;
  }
  return buf;
}

}  // namespace

std::string GgufKey::Render() const {
  if (type == ValueType::kString) return text;
  if (type == ValueType::kArray)
    return "[" + std::to_string(count) + " × " + std::string(ValueTypeName(element_type)) + "]";
  if (type == ValueType::kBool) return raw[0] != 0 ? "true" : "false";
  char buf[64];
  std::to_chars_result r{};
  auto as = [&](auto v) {
    std::memcpy(&v, raw.data(), sizeof(v));
    r = std::to_chars(buf, buf + sizeof buf, v);
  };
  if (type == ValueType::kFloat32 || type == ValueType::kFloat64) {  // the shortest exact form
    float f;
    double d;
    if (type == ValueType::kFloat32) return std::memcpy(&f, raw.data(), 4), ShortestText(f);
    return std::memcpy(&d, raw.data(), 8), ShortestText(d);
  }
  switch (type) {
    case ValueType::kUint8: as(uint8_t{}); break;
    case ValueType::kInt8: as(int8_t{}); break;
    case ValueType::kUint16: as(uint16_t{}); break;
    case ValueType::kInt16: as(int16_t{}); break;
    case ValueType::kUint32: as(uint32_t{}); break;
    case ValueType::kInt32: as(int32_t{}); break;
    case ValueType::kUint64: as(uint64_t{}); break;
    case ValueType::kInt64: as(int64_t{}); break;
    default: return "";
  }
  return std::string(buf, r.ptr);
}

std::vector<uint64_t> GgufTensorInfo::Shape() const { return std::vector<uint64_t>(ne.rbegin(), ne.rend()); }

const GgufKey* GgufFile::Find(std::string_view key) const {
  for (const auto& k : keys)
    if (k.key == key) return &k;
  return nullptr;
}

std::optional<std::string> GgufFile::String(std::string_view key) const {
  const GgufKey* k = Find(key);
  if (!k || k->type != ValueType::kString) return std::nullopt;
  return k->text;
}

bool LooksLikeGguf(std::span<const uint8_t> prefix) {
  return prefix.size() >= 4 && std::memcmp(prefix.data(), "GGUF", 4) == 0;
}

Result<GgufParse> ParseGgufHeader(std::span<const uint8_t> prefix, std::optional<uint64_t> file_size) {
  Cursor c(prefix, file_size);
  auto outcome = [&]() -> Result<GgufParse> {
    if (c.error()) return *c.error();
    return GgufParse{std::nullopt, c.need()};
  };
  GgufFile file;
  uint32_t magic = 0;
  if (!c.Read(magic, "the magic")) return outcome();
  if (magic != kMagic) {
    std::string seen(reinterpret_cast<const char*>(prefix.data()), 4);
    return Bad(ErrorCode::InvalidHeader, "not a GGUF file: it starts with " + Quote(seen) + ", not `GGUF`", 0);
  }
  if (!c.Read(file.version, "the version")) return outcome();
  const uint32_t v = file.version;
  if (v == 0) return Bad(ErrorCode::InvalidHeader, "bad GGUF version 0", 4);
  if ((v & 0xFFFF) == 0)
    return Bad(ErrorCode::InvalidHeader,
               "GGUF version " + std::to_string(v) +
                   " is extremely large: the file is big-endian (peft-bridge and llama.cpp read little-endian files)",
               4);
  if (v == 1) return Bad(ErrorCode::InvalidHeader, "GGUF version 1 is no longer supported (ggml reads 2 and 3)", 4);
  if (v > kVersion)
    return Bad(ErrorCode::InvalidHeader, "GGUF version " + std::to_string(v) + " is newer than the 3 ggml reads", 4);
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.Read(n_tensors, "the tensor count") || !c.Read(n_kv, "the key count")) return outcome();
  // Every key takes at least 13 bytes and every tensor info at least 25: counts the bytes cannot hold are refused
  // before any loop or allocation.
  // The records kept per key and per tensor are several times their smallest encoding, so the counts are capped
  // too (far above any adapter or model: tens of keys, thousands of tensors), which bounds the memory to a few
  // tens of megabytes whatever the header says.
  auto too_many = [&](uint64_t n, uint64_t min_bytes, uint64_t cap, const char* what,
                      uint64_t at) -> std::optional<Error> {
    if (n > cap)
      return Bad(ErrorCode::HeaderTooLarge,
                 std::string("the header declares ") + std::to_string(n) + " " + what + "; peft-bridge reads at most " +
                     std::to_string(cap),
                 at);
    if (file_size && n > *file_size / min_bytes)
      return Bad(ErrorCode::MetadataIncompleteBuffer,
                 "the file ends at byte " + std::to_string(*file_size) + ", before the " + std::to_string(n) + " " +
                     what + " the header declares (each takes at least " + std::to_string(min_bytes) + " bytes)",
                 at);
    return std::nullopt;
  };
  if (auto e = too_many(n_tensors, 25, kMaxTensors, "tensors", 8)) return *e;
  if (auto e = too_many(n_kv, 13, kMaxKeys, "keys", 16)) return *e;

  std::unordered_set<std::string> seen;
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufKey kv;
    if (!ReadKey(c, i, kv)) return outcome();
    if (!seen.insert(kv.key).second)
      return Bad(ErrorCode::InvalidHeader, "duplicate key " + Quote(kv.key) + " (key " + std::to_string(i) + ")",
                 kv.offset);
    file.keys.push_back(std::move(kv));
  }
  if (const GgufKey* a = file.Find("general.alignment")) {
    if (a->type != ValueType::kUint32)
      return Bad(ErrorCode::InvalidHeader,
                 "key `general.alignment` must be of type UINT32 but is " + std::string(ValueTypeName(a->type)),
                 a->offset);
    const uint32_t alignment = static_cast<uint32_t>(*a->Number());
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      return Bad(ErrorCode::InvalidHeader, "alignment " + std::to_string(alignment) + " is not a power of 2",
                 a->offset);
    file.alignment = alignment;
  }
  seen.clear();
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    if (!ReadTensorInfo(c, i, t)) return outcome();
    if (!seen.insert(t.name).second)
      return Bad(ErrorCode::TensorInvalidInfo,
                 "duplicate tensor name " + Quote(t.name) + " (tensor " + std::to_string(i) + ")", t.info_offset,
                 t.name);
    file.tensors.push_back(std::move(t));
  }
  file.infos_end = c.pos();
  file.data_start = n_tensors > 0 ? Pad(c.pos(), file.alignment) : c.pos();
  if (file_size && file.data_start > *file_size)
    return Bad(ErrorCode::MetadataIncompleteBuffer,
               "the file ends at byte " + std::to_string(*file_size) +
                   ", inside the padding before the data section at " + std::to_string(file.data_start),
               c.pos());
  uint64_t expected = 0;
  for (const auto& t : file.tensors) {
    if (t.offset != expected)
      return Bad(ErrorCode::InvalidOffset,
                 "tensor " + Quote(t.name) + " has offset " + std::to_string(t.offset) + ", expected " +
                     std::to_string(expected) + " (each tensor follows the previous one, padded to " +
                     std::to_string(file.alignment) + " bytes)",
                 t.info_offset, t.name);
    const uint64_t padded = Pad(t.size, file.alignment);
    if (padded < t.size || padded > UINT64_MAX - expected || expected + padded > UINT64_MAX - file.data_start)
      return Bad(ErrorCode::ValidationOverflow, "the data section's size overflows at tensor " + Quote(t.name),
                 t.info_offset, t.name);
    if (file_size && file.data_start + expected + t.size > *file_size)
      return Bad(ErrorCode::MetadataIncompleteBuffer,
                 "tensor " + Quote(t.name) + " ends at byte " + std::to_string(file.data_start + expected + t.size) +
                     ", past the end of the file (" + std::to_string(*file_size) + " bytes)",
                 t.info_offset, t.name);
    expected += padded;
  }
  file.data_size = expected;
  return GgufParse{std::move(file), 0};
}

}  // namespace pb::gguf
