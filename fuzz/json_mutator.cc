#include "json_mutator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_input.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace pb::fuzz {

namespace {

using json = nlohmann::ordered_json;
using Rng = std::mt19937;

constexpr size_t kMaxTreeDepth = 64;  // deeper parts are mutated as bytes (nlohmann's dump recurses)
constexpr size_t kMaxNodes = 20000;   // nodes considered when picking one
const std::string kHugeMarker = "\x04HUGE\x04";

size_t Below(Rng& rng, size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
bool OneIn(Rng& rng, size_t n) { return Below(rng, n) == 0; }
// Log-uniform in [lo, hi], so 10k and 1M are both common.
uint64_t LogUniform(Rng& rng, uint64_t lo, uint64_t hi) {
  double x = std::exp(std::uniform_real_distribution<double>(std::log(double(lo)), std::log(double(hi)))(rng));
  return std::clamp<uint64_t>(static_cast<uint64_t>(x), lo, hi);
}

std::string Repeat(uint64_t count, const std::string& body) {
  return "\x01R" + std::to_string(count) + "\x02" + body + "\x03";
}

std::string JsonEscaped(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

// A JSON-string-safe fragment (no quotes), for the compact encoding.
std::string Fragment(Rng& rng, const MutatorVocabulary& vocab) {
  static const char* const kFragments[] = {"a",
                                           ".",
                                           "q_proj.",
                                           "layers.\x01#.",
                                           "model.layers.\x01#.self_attn.",
                                           "(a+)",
                                           "a*",
                                           ".*",
                                           "[a-z]",
                                           "\\\\.",
                                           "\xc3\xa9",
                                           "\\u00e9",
                                           "_",
                                           "{N}"};
  if (!vocab.strings.empty() && OneIn(rng, 3)) {
    std::string s = JsonEscaped(vocab.strings[Below(rng, vocab.strings.size())]);
    return s.substr(1, s.size() - 2);
  }
  return kFragments[Below(rng, std::size(kFragments))];
}

// The compact text of a huge value.
std::string HugeValue(Rng& rng, const MutatorVocabulary& vocab) {
  switch (Below(rng, 7)) {
    case 0: return "\"" + Repeat(LogUniform(rng, 10000, 1000000), Fragment(rng, vocab)) + "\"";      // long name
    case 1: return "{\"" + Repeat(LogUniform(rng, 10000, 1000000), Fragment(rng, vocab)) + "\":1}";  // long key
    case 2: {                                                                                        // deep arrays
      uint64_t n = LogUniform(rng, 1000, 200000);
      return Repeat(n, "[") + "1" + Repeat(n, "]");
    }
    case 3: {  // deep objects
      uint64_t n = LogUniform(rng, 1000, 200000);
      std::string key = vocab.keys.empty() ? "a" : vocab.keys[Below(rng, vocab.keys.size())];
      return Repeat(n, "{" + JsonEscaped(key) + ":") + "1" + Repeat(n, "}");
    }
    case 4: {  // many keys
      std::string value = OneIn(rng, 2) ? "1" : "\"x\"";
      return "{" + Repeat(LogUniform(rng, 10000, 100000), "\"" + Fragment(rng, vocab) + "\x01#\":" + value + ",") +
             "\"z\":" + value + "}";
    }
    case 5:  // many elements
      return "[" + Repeat(LogUniform(rng, 10000, 100000), "\"" + Fragment(rng, vocab) + "\x01#\",") + "\"z\"]";
    default:  // a long dotted module name
      return "\"" + Repeat(LogUniform(rng, 1000, 100000), "layers.\x01#.") + "q_proj\"";
  }
}

json EdgeNumber(Rng& rng) {
  switch (Below(rng, 12)) {
    case 0: return 0;
    case 1: return -1;
    case 2: return 1;
    case 3: return std::numeric_limits<int64_t>::max();
    case 4: return std::numeric_limits<int64_t>::min();
    case 5: return std::numeric_limits<uint64_t>::max();
    case 6: return 1e308;
    case 7: return -0.0;
    case 8: return 5e-324;
    case 9: return 0.5;
    case 10: return 16.0;
    default: return static_cast<int64_t>(Below(rng, 70000)) - 100;
  }
}

json RandomScalar(Rng& rng, const MutatorVocabulary& vocab) {
  switch (Below(rng, 7)) {
    case 0: return nullptr;
    case 1: return OneIn(rng, 2);
    case 2:
    case 3: return EdgeNumber(rng);
    case 4: return vocab.strings.empty() ? "x" : vocab.strings[Below(rng, vocab.strings.size())];
    case 5: return vocab.keys.empty() ? "k" : vocab.keys[Below(rng, vocab.keys.size())];
    default: return std::string(Below(rng, 8), static_cast<char>('a' + Below(rng, 26)));
  }
}

json RandomValue(Rng& rng, const MutatorVocabulary& vocab) {
  switch (Below(rng, 5)) {
    case 0: {
      json a = json::array();
      for (size_t n = Below(rng, 4); n > 0; --n) a.push_back(RandomScalar(rng, vocab));
      return a;
    }
    case 1: {
      json o = json::object();
      for (size_t n = Below(rng, 3); n > 0; --n)
        o[vocab.keys.empty() ? "k" : vocab.keys[Below(rng, vocab.keys.size())]] = RandomScalar(rng, vocab);
      return o;
    }
    default: return RandomScalar(rng, vocab);
  }
}

void MutateString(Rng& rng, std::string& s, const MutatorVocabulary& vocab) {
  static const std::string_view kBits[] = {".",      "*",
                                           "+",      "?",
                                           "(",      ")",
                                           "[",      "]",
                                           "{2,3}",  "|",
                                           "^",      "$",
                                           "\\",     "(?i)",
                                           "(?P<n>", "(?=",
                                           "\\d",    "\\.",
                                           ".0.",    ".lora_A.weight",
                                           "{N}",    "/",
                                           "..",     "\xc3\xa9",
                                           "\xff",   std::string_view("\0", 1)};
  std::string bit = OneIn(rng, 3) && !vocab.strings.empty() ? vocab.strings[Below(rng, vocab.strings.size())]
                                                            : std::string(kBits[Below(rng, std::size(kBits))]);
  size_t at = Below(rng, s.size() + 1);
  switch (Below(rng, 5)) {
    case 0: s.insert(at, bit); break;
    case 1: s.erase(at, Below(rng, 4)); break;
    case 2: s += s; break;
    case 3: s = bit; break;
    default: s.append(bit); break;
  }
}

void CollectNodes(json& root, std::vector<json*>& nodes) {
  std::vector<json*> todo{&root};
  while (!todo.empty() && nodes.size() < kMaxNodes) {
    json* n = todo.back();
    todo.pop_back();
    nodes.push_back(n);
    if (n->is_structured())
      for (auto& child : *n) todo.push_back(&child);
  }
}

// One tree mutation; returns false if nothing changed. May leave kHugeMarker strings for the caller.
bool MutateTree(Rng& rng, json& root, const MutatorVocabulary& vocab) {
  std::vector<json*> nodes;
  CollectNodes(root, nodes);
  json& node = *nodes[Below(rng, nodes.size())];
  switch (Below(rng, 16)) {
    case 0: node = RandomScalar(rng, vocab); return true;
    case 1:
    case 2:
    case 3: {  // insert a member / element
      if (node.is_object()) {
        std::string key = vocab.keys.empty() || OneIn(rng, 4) ? std::string(1 + Below(rng, 3), 'k')
                                                              : vocab.keys[Below(rng, vocab.keys.size())];
        node[key] = RandomValue(rng, vocab);
        return true;
      }
      if (node.is_array()) {
        json v = node.empty() || OneIn(rng, 2) ? RandomValue(rng, vocab) : node[Below(rng, node.size())];
        node.insert(node.begin() + static_cast<std::ptrdiff_t>(Below(rng, node.size() + 1)), std::move(v));
        return true;
      }
      return false;
    }
    case 4:
    case 5: {  // delete
      if (!node.is_structured() || node.empty()) return false;
      size_t k = Below(rng, node.size());
      if (node.is_object()) node.erase(std::next(node.begin(), static_cast<std::ptrdiff_t>(k)).key());
      else node.erase(k);
      return true;
    }
    case 6: {  // copy another subtree here
      json copy = *nodes[Below(rng, nodes.size())];
      node = std::move(copy);
      return true;
    }
    case 7: {  // wrap
      json inner = std::move(node);
      if (OneIn(rng, 2)) node = json::array({std::move(inner)});
      else
        node = json::object({{vocab.keys.empty() ? "k" : vocab.keys[Below(rng, vocab.keys.size())], std::move(inner)}});
      return true;
    }
    case 8:
    case 9:
    case 10: {
      if (node.is_string()) {
        std::string s = node.get<std::string>();
        MutateString(rng, s, vocab);
        node = s;
        return true;
      }
      if (node.is_number()) {
        node = EdgeNumber(rng);
        return true;
      }
      if (node.is_object() && !node.empty()) {  // rename a key
        auto it = std::next(node.begin(), static_cast<std::ptrdiff_t>(Below(rng, node.size())));
        std::string key = it.key();
        json value = std::move(it.value());
        node.erase(key);
        MutateString(rng, key, vocab);
        node[key] = std::move(value);
        return true;
      }
      return false;
    }
    case 11: {  // a string becomes a list of strings and back (target_modules' two forms)
      if (node.is_string()) {
        node = json::array({node});
        return true;
      }
      if (node.is_array() && !node.empty()) {
        json first = node[0];
        node = std::move(first);
        return true;
      }
      return false;
    }
    case 12: {  // reorder an object (first-match order of rank_pattern)
      if (!node.is_object() || node.size() < 2) return false;
      json reordered = json::object();
      std::vector<std::string> keys;
      for (auto& [k, v] : node.items()) keys.push_back(k);
      std::shuffle(keys.begin(), keys.end(), rng);
      for (const auto& k : keys) reordered[k] = node[k];
      node = std::move(reordered);
      return true;
    }
    case 13:
      if (OneIn(rng, 3)) {
        node = kHugeMarker;
        return true;
      }
      return false;
    default: node = RandomValue(rng, vocab); return true;
  }
}

bool Depth(const json& root, size_t limit) {
  std::vector<std::pair<const json*, size_t>> todo{{&root, 1}};
  while (!todo.empty()) {
    auto [n, d] = todo.back();
    todo.pop_back();
    if (d > limit) return false;
    if (n->is_structured())
      for (const auto& child : *n) todo.push_back({&child, d + 1});
  }
  return true;
}

// Tree mutation of a JSON text; false if it does not parse (or is too deep to dump safely).
bool MutateJsonText(Rng& rng, std::string& text, const MutatorVocabulary& vocab) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !Depth(root, kMaxTreeDepth)) return false;
  bool changed = false;
  for (size_t n = 1 + Below(rng, 3), tries = 0; n > 0 && tries < 12; ++tries)
    if (MutateTree(rng, root, vocab)) {
      changed = true;
      --n;
    }
  if (!changed) return false;
  std::string out = root.dump(OneIn(rng, 2) ? -1 : 2, ' ', false, json::error_handler_t::replace);
  const std::string marker = JsonEscaped(kHugeMarker);
  for (size_t at; (at = out.find(marker)) != std::string::npos;) out.replace(at, marker.size(), HugeValue(rng, vocab));
  text = std::move(out);
  return true;
}

// A safetensors file: mutate its header JSON and fix the length prefix; the data stays.
bool MutateSafetensors(Rng& rng, std::string& part, const MutatorVocabulary& vocab) {
  if (part.size() < 10) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(part[i]);
  if (n > part.size() - 8 || part[8] != '{') return false;
  std::string header = part.substr(8, n);
  if (!MutateJsonText(rng, header, vocab) || header.find('\x01') != std::string::npos) return false;
  if (!OneIn(rng, 4)) header.append((8 - header.size() % 8) % 8, ' ');  // keep the data aligned, mostly
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  part = out + header + part.substr(8 + n);
  return true;
}

// Picks a repetition count in the part and changes it.
bool MutateRepeatCount(Rng& rng, std::string& part) {
  std::vector<size_t> at;
  for (size_t i = part.find("\x01R"); i != std::string::npos; i = part.find("\x01R", i + 2)) at.push_back(i + 2);
  if (at.empty()) return false;
  size_t begin = at[Below(rng, at.size())], end = begin;
  while (end < part.size() && part[end] >= '0' && part[end] <= '9') ++end;
  static const uint64_t kCounts[] = {0, 1, 2, 127, 128, 129, 1000, 10000, 65536, 100000, 200000, 1000000};
  part.replace(begin, end - begin, std::to_string(kCounts[Below(rng, std::size(kCounts))]));
  return true;
}

bool MutateBytes(std::string& part, size_t max_size) {
  size_t cap = std::max(max_size, part.size());
  std::string buf = part;
  buf.resize(cap);
  size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(buf.data()), part.size(), cap);
  buf.resize(n);
  part = std::move(buf);
  return true;
}

}  // namespace

size_t MutateInput(uint8_t* data, size_t size, size_t max_size, unsigned seed, const MutatorVocabulary& vocab) {
  Rng rng(seed);
  std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  for (auto p : SplitParts(input, 64)) parts.emplace_back(p);
  const size_t roll = Below(rng, 100);
  std::string& part = parts[Below(rng, parts.size())];
  bool changed = false;
  if (roll < 5 && parts.size() > 1) {  // part-level
    size_t a = Below(rng, parts.size()), b = Below(rng, parts.size());
    if (OneIn(rng, 2)) std::swap(parts[a], parts[b]);
    else if (OneIn(rng, 2)) parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(a), parts[b]);
    else parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(a));
    changed = true;
  } else if (roll < 8) {
    changed = MutateRepeatCount(rng, part);
    if (!changed && part.find('{') == std::string::npos && OneIn(rng, 2)) {  // a non-JSON part: a huge run
      part.insert(Below(rng, part.size() + 1), Repeat(LogUniform(rng, 1000, 1000000), Fragment(rng, vocab)));
      changed = true;
    }
  } else if (roll < 55) {
    changed = MutateSafetensors(rng, part, vocab) || MutateJsonText(rng, part, vocab);
  }
  if (!changed) {
    // Byte-level, within the room the other parts leave.
    size_t others = input.size() - std::min(input.size(), part.size());
    MutateBytes(part, max_size > others ? max_size - others : part.size());
  }
  std::string out = JoinParts(parts);
  if (out.size() > max_size) {  // too large: plain byte mutation of the whole input
    return LLVMFuzzerMutate(data, size, max_size);
  }
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace pb::fuzz
