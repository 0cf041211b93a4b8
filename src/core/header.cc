#include <algorithm>
#include <cstring>
#include <random>

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
  return TensorInfo{RecordName(r), r.dtype(), std::span<const uint64_t>(dims_.data() + r.shape_offset, r.rank), r.begin,
                    r.end};
}

namespace {

// A seeded hash for the name index. Names come from untrusted files: with a fixed, known hash someone
// could craft 200,000 colliding names and make linear probing quadratic. A per-process random seed
// makes such collisions impossible to precompute.
uint64_t NameHash(std::string_view name) {
  static const uint64_t seed = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  uint64_t h = seed ^ (name.size() * 0x9E3779B97F4A7C15ull);
  size_t i = 0;
  for (; i + 8 <= name.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, name.data() + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, name.data() + i, name.size() - i);
  h = (h ^ tail) * 0x94D049BB133111EBull;
  h ^= h >> 29;  // final avalanche, so the low bits used for the slot depend on every byte
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

}  // namespace

size_t Header::SlotFor(std::string_view name) const {
  const size_t mask = name_slots_.size() - 1;  // the size is a power of two
  size_t slot = static_cast<size_t>(NameHash(name)) & mask;
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
