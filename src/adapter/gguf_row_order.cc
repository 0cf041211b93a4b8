#include "adapter/gguf_row_order.h"

#include <initializer_list>
#include <string>

#include "core/json.h"

namespace pb::adapter {
namespace {

constexpr std::pair<RowPermutationKind, std::string_view> kKindNames[] = {
    {RowPermutationKind::kLlamaRope, "llama_rope"},
    {RowPermutationKind::kFalconQkv, "falcon_qkv"},
    {RowPermutationKind::kGptNeoxQkv, "gptneox_qkv"},
};
constexpr std::pair<HeadCountField, std::string_view> kHeadNames[] = {
    {HeadCountField::kAttentionHeads, "num_attention_heads"},
    {HeadCountField::kKeyValueHeads, "num_key_value_heads"},
};

template <typename E, size_t N>
std::string_view NameOf(const std::pair<E, std::string_view> (&names)[N], E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";
}

template <typename E, size_t N>
std::optional<E> ValueOf(const std::pair<E, std::string_view> (&names)[N], std::string_view name) {
  for (const auto& [v, n] : names)
    if (n == name) return v;
  return std::nullopt;
}

// Non-negative integer member of a JSON object, or nullopt.
std::optional<uint64_t> UintField(const Json& obj, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = obj.find(key);
    if (it != obj.end() && it->is_number_unsigned()) return it->get<uint64_t>();
  }
  return std::nullopt;
}

}  // namespace

std::string_view RowPermutationKindName(RowPermutationKind kind) { return NameOf(kKindNames, kind); }
std::optional<RowPermutationKind> ParseRowPermutationKind(std::string_view name) { return ValueOf(kKindNames, name); }
std::string_view HeadCountFieldName(HeadCountField field) { return NameOf(kHeadNames, field); }
std::optional<HeadCountField> ParseHeadCountField(std::string_view name) { return ValueOf(kHeadNames, name); }

std::optional<HeadCounts> HeadCountsFromConfig(std::string_view config_json) {
  auto parsed = ParseJson(config_json, "config.json");
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  const Json& doc = parsed.value();
  auto heads = UintField(doc, {"num_attention_heads", "n_head", "n_heads"});
  if (!heads) return std::nullopt;
  return HeadCounts{*heads,
                    UintField(doc, {"num_key_value_heads", "num_kv_heads", "n_head_kv", "n_kv_heads"}).value_or(0)};
}

Result<std::vector<uint64_t>> GgufRowOrder(const RowPermutation& permutation, uint64_t rows, uint64_t heads,
                                           uint64_t kv_heads) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::InvalidArgument, "cannot reorder " + std::to_string(rows) + " rows as " +
                                                     std::string(RowPermutationKindName(permutation.kind)) + ": " +
                                                     why);
  };
  std::vector<uint64_t> order;
  // Whatever the head counts, no row to reorder means an empty order (and no division by a sum that may wrap).
  if (rows == 0) {
    const uint64_t n = permutation.kind == RowPermutationKind::kLlamaRope &&
                               permutation.heads == HeadCountField::kKeyValueHeads && kv_heads
                           ? kv_heads
                           : heads;
    if (n == 0 || (permutation.kind == RowPermutationKind::kFalconQkv && n % (kv_heads ? kv_heads : 1)))
      return bad(std::to_string(n) + " heads do not divide them");
    return order;
  }
  switch (permutation.kind) {
    case RowPermutationKind::kLlamaRope: {
      // LlamaModel.permute: w.reshape(n, 2, rows/n/2, ...).swapaxes(1, 2).reshape(rows, ...), with n the KV
      // head count for k when the config has one. Within each head, the first and second halves of the rows
      // are interleaved: row h*d + 2j + t comes from h*d + t*d/2 + j.
      uint64_t n = permutation.heads == HeadCountField::kKeyValueHeads && kv_heads ? kv_heads : heads;
      // Every product and sum of head counts is bounded by `rows` before it is formed (a count of 2^63 would
      // wrap), so the checks divide instead of multiplying.
      if (n == 0 || n > rows / 2 || rows % n || (rows / n) % 2)
        return bad(std::to_string(n) + " heads of an even size do not divide them");
      uint64_t d = rows / n, half = d / 2;
      order.resize(rows);
      for (uint64_t h = 0; h < n; ++h)
        for (uint64_t j = 0; j < half; ++j)
          for (uint64_t t = 0; t < 2; ++t) order[h * d + 2 * j + t] = h * d + t * half + j;
      break;
    }
    case RowPermutationKind::kFalconQkv: {
      // FalconModel: rows grouped per KV head as [q x heads/kv, k, v] become all q, all k, all v. llama.cpp takes
      // one KV head when the config names none.
      uint64_t n = heads, kv = kv_heads ? kv_heads : 1;
      if (n == 0 || n % kv)
        return bad(std::to_string(n) + " heads are not a multiple of " + std::to_string(kv) + " KV heads");
      if (n > rows || kv > (rows - n) / 2 || rows % (n + 2 * kv))
        return bad("not (heads + 2 * kv_heads) rows of a common head size");
      uint64_t d = rows / (n + 2 * kv), g = n / kv;
      order.reserve(rows);
      for (uint64_t j = 0; j < kv; ++j)  // q heads of group j
        for (uint64_t i = 0; i < g * d; ++i) order.push_back(j * (g + 2) * d + i);
      for (uint64_t slot : {g, g + 1})  // then every group's k, then every group's v
        for (uint64_t j = 0; j < kv; ++j)
          for (uint64_t i = 0; i < d; ++i) order.push_back((j * (g + 2) + slot) * d + i);
      break;
    }
    case RowPermutationKind::kGptNeoxQkv: {
      // GPTNeoXModel: rows [heads, 3, d] (q, k, v per head) become [3, heads, d].
      uint64_t n = heads;
      if (n == 0 || n > rows / 3 || rows % (3 * n))
        return bad("not 3 * " + std::to_string(n) + " heads of a common size");
      uint64_t d = rows / (3 * n);
      order.reserve(rows);
      for (uint64_t t = 0; t < 3; ++t)
        for (uint64_t h = 0; h < n; ++h)
          for (uint64_t i = 0; i < d; ++i) order.push_back((h * 3 + t) * d + i);
      break;
    }
  }
  return order;
}

}  // namespace pb::adapter
