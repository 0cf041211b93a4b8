// llama.cpp's row orders: the converters (convert_hf_to_gguf.py, convert_lora_to_gguf.py) reorder the output
// rows of some attention weights (and so of a LoRA's B factor) by head. Naming tables say which modules
// (naming_tables.h: ModuleTemplate::gguf_permute); this file knows the orders, so that gguf-names adapters are
// read back into HF order and written in llama.cpp's.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pb::adapter {

enum class RowPermutationKind : uint8_t {
  kLlamaRope,   // "llama_rope": LlamaModel.permute on q/k
  kFalconQkv,   // "falcon_qkv": FalconModel's query_key_value regrouping
  kGptNeoxQkv,  // "gptneox_qkv": GPTNeoXModel's query_key_value regrouping
};

// The head count that splits the rows.
enum class HeadCountField : uint8_t {
  kAttentionHeads,  // "num_attention_heads"
  kKeyValueHeads,   // "num_key_value_heads": the KV head count when the config has one, else the attention
                    // head count, as llama.cpp does (llama_rope on k)
};

struct RowPermutation {
  RowPermutationKind kind = RowPermutationKind::kLlamaRope;
  HeadCountField heads = HeadCountField::kAttentionHeads;
};

// The names the naming tables spell, both ways.
std::string_view RowPermutationKindName(RowPermutationKind kind);
std::optional<RowPermutationKind> ParseRowPermutationKind(std::string_view name);
std::string_view HeadCountFieldName(HeadCountField field);
std::optional<HeadCountField> ParseHeadCountField(std::string_view name);

// A base model's head counts, under the config.json names llama.cpp's converters read: heads from
// num_attention_heads / n_head / n_heads, kv_heads from num_key_value_heads / num_kv_heads / n_head_kv /
// n_kv_heads (0 when the config has none). nullopt when the text is not a JSON object with a head count.
struct HeadCounts {
  uint64_t heads = 0;
  uint64_t kv_heads = 0;
};
std::optional<HeadCounts> HeadCountsFromConfig(std::string_view config_json);

// The row order llama.cpp's converter gives a weight with `rows` output rows: result[i] is the source row
// that lands at row i. `heads` / `kv_heads` as HeadCountsFromConfig gives them (kv_heads 0: none).
// InvalidArgument if `rows` is not divisible as the permutation needs.
Result<std::vector<uint64_t>> GgufRowOrder(const RowPermutation& permutation, uint64_t rows, uint64_t heads,
                                           uint64_t kv_heads);

}  // namespace pb::adapter
