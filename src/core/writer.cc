#include "core/writer.h"

#include <algorithm>
#include <numeric>

namespace pb {

void AppendJsonString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(ch);  // '/', DEL and non-ASCII are written raw, as serde_json does
        }
    }
  }
  out.push_back('"');
}

size_t JsonStringLength(std::string_view text) {
  size_t n = 2;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\' || c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r') n += 2;
    else if (c < 0x20) n += 6;
    else n += 1;
  }
  return n;
}

Result<WritePlan> PlanWrite(const std::vector<TensorSpec>& tensors, const std::optional<Metadata>& metadata,
                            TensorOrder order) {
  std::vector<size_t> idx(tensors.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  {
    std::vector<size_t> by_name = idx;
    std::sort(by_name.begin(), by_name.end(), [&](size_t a, size_t b) { return tensors[a].name < tensors[b].name; });
    for (size_t k = 0; k < by_name.size(); ++k) {
      const std::string& name = tensors[by_name[k]].name;
      if (name == "__metadata__")
        return MakeError(ErrorCode::InvalidArgument, "a tensor cannot be named `__metadata__`", name);
      if (k > 0 && tensors[by_name[k - 1]].name == name)
        return MakeError(ErrorCode::InvalidArgument, "tensor name `" + name + "` appears twice", name);
    }
  }
  if (order == TensorOrder::kReference) {
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      if (tensors[a].dtype != tensors[b].dtype) return tensors[a].dtype > tensors[b].dtype;
      return tensors[a].name < tensors[b].name;  // std::string compares bytes as unsigned char
    });
  }

  WritePlan plan;
  std::string json = "{";
  if (metadata) {
    Metadata sorted = *metadata;
    std::sort(sorted.begin(), sorted.end());
    for (size_t k = 1; k < sorted.size(); ++k)
      if (sorted[k].first == sorted[k - 1].first)
        return MakeError(ErrorCode::InvalidArgument, "metadata key `" + sorted[k].first + "` appears twice");
    json += "\"__metadata__\":{";
    for (size_t k = 0; k < sorted.size(); ++k) {
      if (k) json.push_back(',');
      AppendJsonString(json, sorted[k].first);
      json.push_back(':');
      AppendJsonString(json, sorted[k].second);
    }
    json.push_back('}');
  }
  uint64_t offset = 0;
  for (size_t i : idx) {
    const TensorSpec& t = tensors[i];
    uint64_t numel = 1, bits = 0;
    bool overflow = false;
    for (uint64_t d : t.shape)
      if (__builtin_mul_overflow(numel, d, &numel)) {
        overflow = true;
        break;
      }
    if (overflow || __builtin_mul_overflow(numel, uint64_t{DtypeBits(t.dtype)}, &bits))
      return MakeError(ErrorCode::ValidationOverflow, "tensor `" + t.name + "`: size overflows 64 bits", t.name);
    if (bits % 8)
      return MakeError(ErrorCode::MisalignedSlice, "tensor `" + t.name + "`: elements do not fill whole bytes", t.name);
    uint64_t end;
    if (__builtin_add_overflow(offset, bits / 8, &end))
      return MakeError(ErrorCode::ValidationOverflow, "total data size overflows 64 bits", t.name);
    plan.tensors.push_back({i, offset, end});
    if (json.size() > 1) json.push_back(',');
    AppendJsonString(json, t.name);
    json += ":{\"dtype\":\"";
    json += DtypeName(t.dtype);
    json += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d) json.push_back(',');
      json += std::to_string(t.shape[d]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
    if (json.size() > kMaxHeaderSize) return MakeError(ErrorCode::HeaderTooLarge, "header exceeds 100,000,000 bytes");
  }
  json.push_back('}');
  json.append((8 - json.size() % 8) % 8, ' ');
  if (json.size() > kMaxHeaderSize)
    return MakeError(ErrorCode::HeaderTooLarge,
                     "header of " + std::to_string(json.size()) + " bytes exceeds 100,000,000 bytes");
  uint64_t n = json.size();
  plan.header.resize(8);
  for (int b = 0; b < 8; ++b) plan.header[b] = static_cast<char>((n >> (8 * b)) & 0xFF);
  plan.header += json;
  plan.data_size = offset;
  return plan;
}

Status StreamingWriter::Begin() {
  if (begun_) return MakeError(ErrorCode::InvalidArgument, "Begin called twice");
  begun_ = true;
  return sink_.Write(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(plan_.header.data()), plan_.header.size()));
}

Status StreamingWriter::Write(std::span<const uint8_t> bytes) {
  if (!begun_) return MakeError(ErrorCode::InvalidArgument, "Write called before Begin");
  if (bytes.size() > plan_.data_size - written_)
    return MakeError(ErrorCode::InvalidArgument,
                     "more tensor bytes than planned: " + std::to_string(written_ + bytes.size()) + " > " +
                         std::to_string(plan_.data_size));
  written_ += bytes.size();
  if (bytes.empty()) return Status::Ok();
  return sink_.Write(bytes);
}

std::span<uint8_t> StreamingWriter::Lend(size_t max) {
  if (!begun_) return {};
  return sink_.Lend(static_cast<size_t>(std::min<uint64_t>(max, plan_.data_size - written_)));
}

Status StreamingWriter::Commit(size_t filled) {
  if (filled > plan_.data_size - written_)
    return MakeError(ErrorCode::InvalidArgument, "more tensor bytes than planned");
  written_ += filled;
  return sink_.Commit(filled);
}

Status StreamingWriter::Forwarded(uint64_t n) {
  if (!begun_) return MakeError(ErrorCode::InvalidArgument, "Forwarded called before Begin");
  if (n > plan_.data_size - written_) return MakeError(ErrorCode::InvalidArgument, "more tensor bytes than planned");
  written_ += n;
  return Status::Ok();
}

size_t StreamingWriter::current_tensor() const {
  // The planned tensors are contiguous, so the first one whose end lies beyond the bytes written.
  const auto& t = plan_.tensors;
  auto it =
      std::upper_bound(t.begin(), t.end(), written_, [](uint64_t w, const PlannedTensor& p) { return w < p.end; });
  return static_cast<size_t>(it - t.begin());
}

uint64_t StreamingWriter::current_tensor_remaining() const {
  size_t i = current_tensor();
  return i < plan_.tensors.size() ? plan_.tensors[i].end - written_ : 0;
}

Status StreamingWriter::Finish() {
  if (!begun_) return MakeError(ErrorCode::InvalidArgument, "Finish called before Begin");
  if (written_ != plan_.data_size)
    return MakeError(ErrorCode::InvalidArgument, "only " + std::to_string(written_) + " of " +
                                                     std::to_string(plan_.data_size) + " tensor bytes were written");
  return Status::Ok();
}

}  // namespace pb
