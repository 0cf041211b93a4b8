#include <algorithm>

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

std::optional<size_t> Header::Find(std::string_view name) const {
  auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name, [&](uint32_t i, std::string_view n) {
    return RecordName(records_[i]) < n;
  });
  if (it != by_name_.end() && RecordName(records_[*it]) == name) return *it;
  return std::nullopt;
}

}  // namespace pb
