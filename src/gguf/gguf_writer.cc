#include "gguf/gguf_writer.h"

#include <cstring>
#include <unordered_set>

namespace pb::gguf {

namespace {

Error Invalid(const std::string& what) { return MakeError(ErrorCode::InvalidArgument, "GGUF: " + what); }

class Bytes {
 public:
  explicit Bytes(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void Put(T value) {  // little-endian, as every supported host is
    uint8_t b[sizeof(T)];
    std::memcpy(b, &value, sizeof(T));
    out_.insert(out_.end(), b, b + sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& out_;
};

void PutValue(Bytes& out, const KeyValue& kv) {
  out.Put<uint32_t>(static_cast<uint32_t>(kv.type));
  switch (kv.type) {
    case ValueType::kString: out.PutString(kv.text); break;
    case ValueType::kFloat32: out.Put<float>(static_cast<float>(kv.number)); break;
    case ValueType::kFloat64: out.Put<double>(kv.number); break;
    case ValueType::kUint32: out.Put<uint32_t>(static_cast<uint32_t>(kv.number)); break;
    case ValueType::kInt32: out.Put<int32_t>(static_cast<int32_t>(kv.number)); break;
    case ValueType::kUint64: out.Put<uint64_t>(static_cast<uint64_t>(kv.number)); break;
    case ValueType::kInt64: out.Put<int64_t>(static_cast<int64_t>(kv.number)); break;
    case ValueType::kUint16: out.Put<uint16_t>(static_cast<uint16_t>(kv.number)); break;
    case ValueType::kInt16: out.Put<int16_t>(static_cast<int16_t>(kv.number)); break;
    case ValueType::kUint8: out.Put<uint8_t>(static_cast<uint8_t>(kv.number)); break;
    case ValueType::kInt8: out.Put<int8_t>(static_cast<int8_t>(kv.number)); break;
    case ValueType::kBool: out.Put<uint8_t>(kv.number != 0 ? 1 : 0); break;
    case ValueType::kArray:
      out.Put<uint32_t>(static_cast<uint32_t>(ValueType::kUint32));
      out.Put<uint64_t>(kv.uint32s.size());
      for (uint32_t v : kv.uint32s) out.Put<uint32_t>(v);
      break;
  }
}

}  // namespace

KeyValue KeyValue::String(std::string key, std::string value) {
  KeyValue kv;
  kv.key = std::move(key);
  kv.type = ValueType::kString;
  kv.text = std::move(value);
  return kv;
}

KeyValue KeyValue::Float32(std::string key, float value) {
  KeyValue kv;
  kv.key = std::move(key);
  kv.type = ValueType::kFloat32;
  kv.number = value;
  return kv;
}

KeyValue KeyValue::Uint32(std::string key, uint32_t value) {
  KeyValue kv;
  kv.key = std::move(key);
  kv.type = ValueType::kUint32;
  kv.number = value;
  return kv;
}

KeyValue KeyValue::Uint32Array(std::string key, std::vector<uint32_t> values) {
  KeyValue kv;
  kv.key = std::move(key);
  kv.type = ValueType::kArray;
  kv.uint32s = std::move(values);
  return kv;
}

Result<uint64_t> TensorByteSize(const std::string& name, std::span<const uint64_t> shape, TensorType type) {
  const uint64_t block = BlockElements(type);
  const uint64_t last = shape.empty() ? 1 : shape.back();
  if (last % block != 0)
    return Invalid("tensor `" + name + "`: its last dimension (" + std::to_string(last) + ") is not a multiple of " +
                   std::string(TensorTypeName(type)) + "'s block of " + std::to_string(block));
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    if (d != 0 && elements > UINT64_MAX / d) return Invalid("tensor `" + name + "` is too large");
    elements *= d;
  }
  const uint64_t blocks = elements / block;
  if (blocks > UINT64_MAX / 64) return Invalid("tensor `" + name + "` is too large");
  return blocks * BlockBytes(type);
}

Result<GgufLayout> PlanGguf(std::vector<KeyValue> keys, std::vector<TensorSlot> tensors, uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return Invalid("the alignment must be a power of two, not " + std::to_string(alignment));
  std::unordered_set<std::string> seen;
  for (const auto& kv : keys) {
    if (kv.key.empty()) return Invalid("a key is empty");
    if (!seen.insert(kv.key).second) return Invalid("key `" + kv.key + "` is written twice");
  }
  GgufLayout layout;
  layout.alignment = alignment;
  seen.clear();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.size() > kMaxNameBytes)
      return Invalid("tensor name `" + t.name + "` has " + std::to_string(t.name.size()) +
                     " bytes; llama.cpp reads at most " + std::to_string(kMaxNameBytes));
    if (!seen.insert(t.name).second) return Invalid("tensor `" + t.name + "` is written twice");
    if (t.shape.empty() || t.shape.size() > kMaxDims)
      return Invalid("tensor `" + t.name + "` has " + std::to_string(t.shape.size()) +
                     " dimensions; GGUF holds 1 to 4");
    PB_ASSIGN_OR_RETURN(auto size, TensorByteSize(t.name, t.shape, t.type));
    layout.offsets.push_back(offset);
    layout.sizes.push_back(size);
    offset += Pad(size, alignment);
  }
  layout.keys = std::move(keys);
  layout.tensors = std::move(tensors);
  layout.data_start = EncodeHeader(layout).size();
  layout.file_size = layout.data_start + offset;
  return layout;
}

std::vector<uint8_t> EncodeHeader(const GgufLayout& layout) {
  std::vector<uint8_t> bytes;
  Bytes out(bytes);
  out.Put<uint32_t>(kMagic);
  out.Put<uint32_t>(kVersion);
  out.Put<uint64_t>(layout.tensors.size());
  out.Put<uint64_t>(layout.keys.size());
  for (const auto& kv : layout.keys) {
    out.PutString(kv.key);
    PutValue(out, kv);
  }
  for (size_t i = 0; i < layout.tensors.size(); ++i) {
    const auto& t = layout.tensors[i];
    out.PutString(t.name);
    out.Put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (size_t d = t.shape.size(); d-- > 0;) out.Put<uint64_t>(t.shape[d]);
    out.Put<uint32_t>(static_cast<uint32_t>(t.type));
    out.Put<uint64_t>(i < layout.offsets.size() ? layout.offsets[i] : 0);
  }
  bytes.resize(Pad(bytes.size(), layout.alignment), 0);
  return bytes;
}

}  // namespace pb::gguf
