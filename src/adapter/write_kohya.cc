// kohya-ss convention: <prefix><path with "_">.lora_down.weight (the prefix by component: adapter/kohya_names.h) = A,
// .lora_up.weight = B, .alpha = scaling * r (kohya's scale is alpha / rank), .dora_scale = [out, 1]. The PEFT config
// and the dotted module paths go into the metadata so that reading the file back restores the adapter exactly.
#include <map>

#include "adapter/format_internal.h"
#include "adapter/kohya_names.h"
#include "text/python_json.h"
#include "adapter/tensor_ops.h"

namespace pb::adapter::internal {

Result<AdapterOutput> WriteKohya(const Adapter& adapter, const WriteOptions& options) {
  (void)options;
  AdapterOutput out;
  const FormatTable& table = BuiltinFormatTable(AdapterFormat::kKohya);
  out.weights_name = table.weights_file;
  const std::string prefix = table.write_prefix.value_or(table.prefixes.front());
  std::vector<std::string> module_paths;
  for (const auto& m : adapter.modules) module_paths.push_back(m.path);
  const bool second_text_encoder = HasSecondTextEncoder(module_paths);
  auto reject = [&](const std::string& canonical, const std::string& reason) {
    out.mappings.push_back({canonical, "", "rejected", reason});
  };
  auto add = [&](std::string canonical, std::string name, Tensor t, std::string action) {
    out.weights.tensors.push_back({name, t.dtype, t.shape});
    out.weights.Add(std::move(t));
    out.mappings.push_back({std::move(canonical), std::move(name), std::move(action), ""});
  };
  for (const auto& e : adapter.extras)
    reject(e.key, "kohya LoRA files hold only LoRA factors; " + DescribeExtra(e) + " has no place in them");
  nlohmann::json paths = nlohmann::json::array();
  std::map<std::string, std::string> spelled;  // kohya base name -> the module that took it
  std::optional<uint64_t> uniform_rank;
  std::optional<double> uniform_alpha;
  bool uniform = true;
  for (const auto& m : adapter.modules) {
    if (m.experts) {
      const std::string reason = ExpertsNotHeldReason("kohya", *m.experts);
      reject(PeftKeyFor(m.path, PeftRole::kLoraA), reason);
      reject(PeftKeyFor(m.path, PeftRole::kLoraB), reason);
      continue;
    }
    if (m.shape == LoraShape::kEmbedding || m.b_bias || (m.magnitude && m.shape == LoraShape::kConv)) {
      std::string reason = m.shape == LoraShape::kEmbedding ? "kohya has no embedding LoRA convention"
                           : m.b_bias                       ? "kohya LoRA has no lora_B bias"
                                                            : "kohya's conv dora_scale layout is not PEFT's";
      bool emb = m.shape == LoraShape::kEmbedding;
      reject(PeftKeyFor(m.path, emb ? PeftRole::kEmbeddingA : PeftRole::kLoraA), reason);
      reject(PeftKeyFor(m.path, emb ? PeftRole::kEmbeddingB : PeftRole::kLoraB), reason);
      if (m.b_bias) reject(PeftKeyFor(m.path, PeftRole::kLoraBBias), reason);
      if (m.magnitude) reject(PeftKeyFor(m.path, PeftRole::kMagnitude), reason);
      continue;
    }
    const std::string base = KohyaBaseName(m.path, second_text_encoder, prefix);
    if (auto [it, inserted] = spelled.emplace(base, m.path); !inserted) {
      const std::string reason =
          "its kohya name `" + base + "` is also the name of `" + it->second + "` (dots become underscores)";
      reject(PeftKeyFor(m.path, PeftRole::kLoraA), reason);
      reject(PeftKeyFor(m.path, PeftRole::kLoraB), reason);
      if (m.magnitude) reject(PeftKeyFor(m.path, PeftRole::kMagnitude), reason);
      continue;
    }
    add(PeftKeyFor(m.path, PeftRole::kLoraA), base + table.Find(FormatRole::kLoraA)->suffix, m.a, "copy");
    add(PeftKeyFor(m.path, PeftRole::kLoraB), base + table.Find(FormatRole::kLoraB)->suffix, m.b, "copy");
    const double alpha = m.settings.scaling * static_cast<double>(m.rank());
    out.weights.tensors.push_back({base + table.Find(FormatRole::kAlpha)->suffix, Dtype::F32, {}});
    out.weights.Add(ScalarF32(static_cast<float>(alpha)));
    if (m.magnitude) {
      Tensor d = *m.magnitude;
      d.shape = {m.out_features(), 1};
      add(PeftKeyFor(m.path, PeftRole::kMagnitude), base + table.Find(FormatRole::kMagnitude)->suffix, std::move(d),
          "reshape");
    }
    paths.push_back(m.path);
    if (uniform_rank && (*uniform_rank != m.rank() || *uniform_alpha != alpha)) uniform = false;
    uniform_rank = m.rank();
    uniform_alpha = alpha;
  }
  Metadata meta = table.metadata.value_or(Metadata{});
  if (uniform && uniform_rank) {
    meta.emplace_back("ss_network_dim", std::to_string(*uniform_rank));
    meta.emplace_back("ss_network_alpha", text::PythonFloatRepr(*uniform_alpha));
  }
  meta.emplace_back(kPeftConfigKey, text::DumpPythonJson(adapter.config.document, {.indent = -1, .sort_keys = true}));
  meta.emplace_back(kModulePathsKey, paths.dump());
  out.weights.metadata = std::move(meta);
  return out;
}

}  // namespace pb::adapter::internal
