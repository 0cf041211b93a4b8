// pb::Json: the one JSON document type of the project, and ParseJson, the one way to read JSON text.
//
// Objects keep insertion order (rank_pattern / alpha_pattern match "first in file order", and configs are
// written back in the order read), like nlohmann::ordered_json. But ordered_json finds a key by a linear scan
// on every lookup and every insert, so parsing an object of n keys costs O(n^2): 15 s for a 100k-key config,
// 50 s for a 100k-entry weight_map. IndexedObject adds a hash index over the same vector, so lookups and
// inserts are O(1) on average and a parse is linear.
//
// Duplicate keys keep the first key's position and the last value, as Python's json (a dict) does and as
// PEFT, which reads adapter_config.json with Python's json, sees the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "core/utf8.h"  // ClipForMessage, for the messages about JSON input

namespace pb {

namespace json_detail {

// The ObjectType nlohmann::basic_json is instantiated with: a vector of (key, value) pairs in insertion
// order plus an open-addressing hash table of positions into it. Small objects (the many tiny ones of a
// config) skip the table and scan, which is faster below a few entries and costs no memory.
//
// It offers the members basic_json and its parser call (those of nlohmann::ordered_map). The vector base is
// public because basic_json compares objects with the vector's operators; code outside this header must not
// mutate it through the vector's own members, which would bypass the index.
//
// Entries are pair<Key, T>, not pair<const Key, T> as in a std::map: a pair with a const string cannot be
// moved, so every time the vector grew it copied every key and deep-copied every value (a quarter of the
// time of parsing a 1 M-entry weight_map). Keys must still never change through an iterator.
template <class Key, class T, class IgnoredLess = std::less<Key>, class IgnoredAllocator = void>
class IndexedObject : public std::vector<std::pair<Key, T>> {
 public:
  using key_type = Key;
  using mapped_type = T;
  using Container = std::vector<std::pair<Key, T>>;
  using Allocator = typename Container::allocator_type;
  using iterator = typename Container::iterator;
  using const_iterator = typename Container::const_iterator;
  using size_type = typename Container::size_type;
  using value_type = typename Container::value_type;
  // Not transparent: basic_json then converts every key argument to key_type before calling us.
  using key_compare = std::equal_to<Key>;

  IndexedObject() noexcept(noexcept(Container())) : Container{} {}
  explicit IndexedObject(const Allocator& alloc) noexcept(noexcept(Container(alloc))) : Container{alloc} {}
  template <class It>
  IndexedObject(It first, It last, const Allocator& alloc = Allocator()) : Container{alloc} {
    insert(first, last);
  }
  IndexedObject(std::initializer_list<value_type> init, const Allocator& alloc = Allocator()) : Container{alloc} {
    insert(init.begin(), init.end());
  }

  std::pair<iterator, bool> emplace(const key_type& key, T&& t) {
    if (auto it = find(key); it != this->end()) return {it, false};
    Container::emplace_back(key, std::move(t));
    Added();
    return {std::prev(this->end()), true};
  }
  std::pair<iterator, bool> emplace(key_type&& key, T&& t) {
    if (auto it = find(key); it != this->end()) return {it, false};
    Container::emplace_back(std::move(key), std::move(t));
    Added();
    return {std::prev(this->end()), true};
  }

  T& operator[](const key_type& key) { return emplace(key, T{}).first->second; }
  T& operator[](key_type&& key) { return emplace(std::move(key), T{}).first->second; }
  const T& operator[](const key_type& key) const { return at(key); }

  // The ordered_map contract. basic_json never calls these (it finds, then raises its own error), and the
  // project's code uses find/contains, so a missing key is a bug: stop rather than read past the end.
  T& at(const key_type& key) {
    auto it = find(key);
    if (it == this->end()) std::abort();
    return it->second;
  }
  const T& at(const key_type& key) const {
    auto it = find(key);
    if (it == this->end()) std::abort();
    return it->second;
  }

  iterator find(const key_type& key) { return this->begin() + static_cast<std::ptrdiff_t>(Position(key)); }
  const_iterator find(const key_type& key) const { return this->begin() + static_cast<std::ptrdiff_t>(Position(key)); }
  size_type count(const key_type& key) const { return Position(key) != this->size() ? 1 : 0; }

  size_type erase(const key_type& key) {
    auto it = find(key);
    if (it == this->end()) return 0;
    erase(it);
    return 1;
  }
  iterator erase(iterator pos) { return erase(pos, std::next(pos)); }
  // Erasing shifts the later entries down and rebuilds the index: O(n), which is fine for the rare erase.
  iterator erase(iterator first, iterator last) {
    const auto offset = std::distance(this->begin(), first);
    Container::erase(first, last);
    Reindex();
    return this->begin() + offset;
  }

  std::pair<iterator, bool> insert(value_type&& value) { return emplace(value.first, std::move(value.second)); }
  std::pair<iterator, bool> insert(const value_type& value) {
    if (auto it = find(value.first); it != this->end()) return {it, false};
    Container::push_back(value);
    Added();
    return {std::prev(this->end()), true};
  }
  template <class InputIt>
  void insert(InputIt first, InputIt last) {
    for (; first != last; ++first) insert(*first);
  }

  void clear() noexcept {
    Container::clear();
    slots_.clear();
  }

 private:
  // Below this many entries a scan beats hashing; the table exists only above it.
  static constexpr size_type kScanLimit = 8;
  // Slots hold 32-bit positions: half the memory of size_t. No object can reach 2^32 - 1 keys (a document
  // is at most JsonLimits::max_bytes long, and each key costs at least 4 bytes).
  using Slot = uint32_t;
  static constexpr Slot kEmpty = static_cast<Slot>(-1);

  static size_t Hash(const key_type& key) { return std::hash<key_type>{}(key); }
  // Container::operator[] by position (our operator[] takes a key and hides it).
  const value_type& Entry(size_type i) const { return Container::operator[](i); }

  // The position of `key`, or size() when absent.
  size_type Position(const key_type& key) const {
    if (slots_.empty()) {
      for (size_type i = 0; i < this->size(); ++i)
        if (Entry(i).first == key) return i;
      return this->size();
    }
    const size_t mask = slots_.size() - 1;
    for (size_t s = Hash(key) & mask;; s = (s + 1) & mask) {  // linear probing; the table is never full
      if (slots_[s] == kEmpty) return this->size();
      if (Entry(slots_[s]).first == key) return size_type{slots_[s]};
    }
  }

  void Place(size_type position) {
    const size_t mask = slots_.size() - 1;
    size_t s = Hash(Entry(position).first) & mask;
    while (slots_[s] != kEmpty) s = (s + 1) & mask;
    slots_[s] = static_cast<Slot>(position);
  }

  // After an emplace_back: index the new last entry, doubling the table to keep its load at most 1/2.
  void Added() {
    if (this->size() <= kScanLimit) return;
    if (this->size() * 2 > slots_.size()) {
      Reindex();
      return;
    }
    Place(this->size() - 1);
  }

  void Reindex() {
    slots_.clear();
    if (this->size() <= kScanLimit) return;
    size_t capacity = 16;
    while (capacity < this->size() * 2) capacity *= 2;  // load at most 1/2 after a rebuild as before
    slots_.assign(capacity, kEmpty);
    for (size_type i = 0; i < this->size(); ++i) Place(i);
  }

  std::vector<Slot> slots_;  // positions into the vector, kEmpty where free; size a power of two
};

}  // namespace json_detail

using Json = nlohmann::basic_json<json_detail::IndexedObject>;

// What a document may be. Depth counts open containers: `[[1]]` is 2 deep. 128 is serde_json's default
// recursion limit, which the safetensors header parser applies too; the writers (DumpPythonJson, dump())
// recurse once per level, so a deeper document is refused before it is parsed.
struct JsonLimits {
  size_t max_depth = 128;
  size_t max_bytes = size_t{512} << 20;  // 512 MiB: ~5 M index entries; more is not a config but an attack
};
inline constexpr size_t kMaxJsonDepth = JsonLimits{}.max_depth;

// Parses `text`, which `what` names in errors ("model.safetensors.index.json", "adapter_config.json"…), into
// a Json. InvalidConfig, with the byte offset, when the text is longer than limits.max_bytes, nests deeper
// than limits.max_depth (checked by a scan before nlohmann builds anything, so neither parsing nor freeing
// the document can overflow the stack), or is not valid JSON. Never throws.
Result<Json> ParseJson(std::string_view text, std::string_view what, const JsonLimits& limits = {});

// True when no container in `value` nests deeper than `max_depth` (checked without recursion): for documents
// built in C++ rather than parsed.
bool WithinDepth(const Json& value, size_t max_depth = kMaxJsonDepth);

}  // namespace pb
