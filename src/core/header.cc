#include <algorithm>
#include <functional>

#include "core/header.h"

namespace pb {

uint64_t TensorInfo::element_count() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string_view Header::RecordName(const Record& r) const {
  const std::string& base = r.name_decoded ? decoded_names_ : raw_;
  return std::string_view(base).substr(r.name_offset, r.name_size);
}

TensorInfo Header::tensor(size_t index) const {
  const Record& r = records_[index];
  return TensorInfo{RecordName(r), r.dtype, std::span<const uint64_t>(dims_.data() + r.shape_offset, r.rank),
                    r.begin, r.end};
}

size_t Header::SlotFor(std::string_view name) const {
  const size_t mask = name_slots_.size() - 1;  // the size is a power of two
  size_t slot = std::hash<std::string_view>{}(name) & mask;
  while (name_slots_[slot] != kEmptySlot && RecordName(records_[name_slots_[slot]]) != name) slot = (slot + 1) & mask;
  return slot;
}

std::optional<size_t> Header::Find(std::string_view name) const {
  if (name_slots_.empty()) return std::nullopt;
  uint32_t r = name_slots_[SlotFor(name)];
  if (r == kEmptySlot) return std::nullopt;
  return r;
}

}  // namespace pb
