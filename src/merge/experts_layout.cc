#include "merge/experts_layout.h"

#include <array>

namespace pb::merge {

namespace {

struct Layout {
  std::string_view holder_from, holder_to;  // rename applied to the holder's path on disk ("" for none)
  std::string_view gate, up, down;          // the per-expert Linear names
};

// transformers 5.24 conversion_mapping.py: "qwen2_moe" and "mixtral" (WeightRenaming(".block_sparse_moe.", ".mlp.")).
constexpr std::array<Layout, 3> kLayouts = {{
    {"", "", "gate_proj", "up_proj", "down_proj"},
    {".mlp.", ".block_sparse_moe.", "w1", "w3", "w2"},
    {"", "", "w1", "w3", "w2"},
}};

}  // namespace

std::optional<std::vector<std::vector<std::string>>> PerExpertTensors(
    const std::string& holder, const std::string& parameter, uint64_t experts,
    const std::function<bool(const std::string&)>& exists) {
  if (experts == 0) return std::nullopt;
  for (const Layout& l : kLayouts) {
    std::string disk = holder;
    if (!l.holder_from.empty()) {
      const size_t at = disk.rfind(l.holder_from);
      if (at == std::string::npos) continue;
      disk.replace(at, l.holder_from.size(), l.holder_to);
    }
    std::vector<std::string_view> parts;
    if (parameter == "gate_up_proj") parts = {l.gate, l.up};
    else if (parameter == "down_proj") parts = {l.down};
    else return std::nullopt;
    std::vector<std::vector<std::string>> out(experts);
    bool all = true;
    for (uint64_t e = 0; e < experts && all; ++e)
      for (std::string_view part : parts) {
        std::string name = disk + "." + std::to_string(e) + "." + std::string(part) + ".weight";
        if (!exists(name)) {
          all = false;
          break;
        }
        out[e].push_back(std::move(name));
      }
    if (all) return out;
  }
  return std::nullopt;
}

}  // namespace pb::merge
