// mlx-lm's convention: adapters.safetensors with <module>.lora_a = A^T, .lora_b = B^T (DoRA: .m) and an
// adapter_config.json that mlx_lm.load reads (fine_tune_type, num_layers, lora_parameters). mlx-lm builds
// every LoRA layer with one rank and one scale, so those must agree across modules: a module whose scaling
// differs gets the ratio folded into its B (one rounding), and mixed ranks are refused.
#include <algorithm>
#include <cmath>

#include "adapter/format_internal.h"
#include "text/python_json.h"
#include "adapter/tensor_ops.h"

namespace pb::adapter::internal {

Result<AdapterOutput> WriteMlx(const Adapter& adapter, const WriteOptions& options) {
  AdapterOutput out;
  const FormatTable& table = BuiltinFormatTable(AdapterFormat::kMlx);
  out.weights_name = table.weights_file;
  out.config_name = table.config_file;
  out.weights.metadata = table.metadata;
  auto reject = [&](const std::string& canonical, const std::string& reason) {
    out.mappings.push_back({canonical, "", "rejected", reason});
  };
  for (const auto& e : adapter.extras)
    reject(e.key, "mlx-lm adapters hold only LoRA factors; " + DescribeExtra(e) + " has no place in them");

  const LoraModule* first = nullptr;
  std::vector<const LoraModule*> written;
  std::vector<uint64_t> layers;
  std::vector<std::string> keys;
  for (const auto& m : adapter.modules) {
    auto reject_module = [&](const std::string& reason) {
      const bool emb = m.shape == LoraShape::kEmbedding;
      reject(PeftKeyFor(m.path, emb ? PeftRole::kEmbeddingA : PeftRole::kLoraA), reason);
      reject(PeftKeyFor(m.path, emb ? PeftRole::kEmbeddingB : PeftRole::kLoraB), reason);
      if (m.b_bias) reject(PeftKeyFor(m.path, PeftRole::kLoraBBias), reason);
      if (m.magnitude) reject(PeftKeyFor(m.path, PeftRole::kMagnitude), reason);
    };
    if (m.experts) {
      reject_module(ExpertsNotHeldReason("mlx-lm", *m.experts));
      continue;
    }
    auto layer = LayerIndex(m.path);
    if (m.shape == LoraShape::kConv) {
      reject_module("mlx-lm has no convolution LoRA layer");
      continue;
    }
    if (!layer) {
      reject_module("mlx-lm applies LoRA inside the transformer blocks only");
      continue;
    }
    if (m.b_bias) {
      reject_module("mlx-lm's LoRA layers have no lora_B bias");
      continue;
    }
    if (m.magnitude && m.shape == LoraShape::kEmbedding) {
      reject_module("mlx-lm's embedding DoRA magnitude is per token, PEFT's per dimension");
      continue;
    }
    if (first && m.rank() != first->rank())
      return MakeError(ErrorCode::UnsupportedAdapter, "mlx-lm uses one rank for every LoRA layer, but `" + first->path +
                                                          "` has rank " + std::to_string(first->rank()) + " and `" +
                                                          m.path + "` rank " + std::to_string(m.rank()));
    if (!first) first = &m;
    written.push_back(&m);
    if (std::find(layers.begin(), layers.end(), *layer) == layers.end()) layers.push_back(*layer);
    std::string marker = "." + std::to_string(*layer) + ".";
    std::string key = m.path.substr(m.path.find(marker) + marker.size());
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  const double scale = first ? first->settings.scaling : 1.0;
  bool any_dora = false;
  Json embedding_modules = Json::array();
  for (const LoraModule* m : written) {
    const bool emb = m->shape == LoraShape::kEmbedding;
    if (emb) embedding_modules.push_back(m->path);
    Tensor b = m->b;
    std::string b_action = "transpose";
    if (m->settings.scaling != scale) {
      PB_ASSIGN_OR_RETURN(auto folded, ScaleTensor(b, m->settings.scaling / scale));
      b = std::move(folded);
      b_action = "fold scale, transpose";
      out.notes.push_back("`" + m->path + "`: scaling " + text::PythonFloatRepr(m->settings.scaling) +
                          " differs from the adapter's " + text::PythonFloatRepr(scale) +
                          "; the ratio is folded into lora_b");
    }
    auto a_t = Transpose2D(m->a);
    auto b_t = Transpose2D(b);
    if (!a_t.ok()) return a_t.error();
    if (!b_t.ok()) return b_t.error();
    auto add = [&](std::string canonical, std::string name, Tensor t, std::string action) {
      out.weights.tensors.push_back({name, t.dtype, t.shape});
      out.weights.Add(std::move(t));
      out.mappings.push_back({std::move(canonical), std::move(name), std::move(action), ""});
    };
    add(PeftKeyFor(m->path, emb ? PeftRole::kEmbeddingA : PeftRole::kLoraA),
        m->path + table.Find(FormatRole::kLoraA)->suffix, std::move(a_t.value()), "transpose");
    add(PeftKeyFor(m->path, emb ? PeftRole::kEmbeddingB : PeftRole::kLoraB),
        m->path + table.Find(FormatRole::kLoraB)->suffix, std::move(b_t.value()), b_action);
    if (m->magnitude) {
      any_dora = true;
      add(PeftKeyFor(m->path, PeftRole::kMagnitude), m->path + table.Find(FormatRole::kMagnitude)->suffix,
          *m->magnitude, "copy");
    }
  }

  // mlx-lm puts LoRA on the last num_layers blocks; count from the lowest adapted block to the model's end.
  std::sort(layers.begin(), layers.end());
  uint64_t total = ConfigInt(options.base_config, "num_hidden_layers").value_or(layers.empty() ? 0 : layers.back() + 1);
  int64_t num_layers = layers.empty() ? 0 : static_cast<int64_t>(total - layers.front());
  Json cfg = Json::object();
  cfg["fine_tune_type"] = any_dora ? "dora" : "lora";
  Json params = Json::object();
  params["dropout"] = adapter.config.lora_dropout;
  params["keys"] = keys;
  params["rank"] = first ? first->rank() : static_cast<uint64_t>(adapter.config.r);
  params["scale"] = scale;
  cfg["lora_parameters"] = params;
  if (adapter.config.base_model_name_or_path) cfg["model"] = *adapter.config.base_model_name_or_path;
  cfg["num_layers"] = num_layers;
  cfg[kPeftConfigKey] = adapter.config.document;  // mlx-lm ignores it; reading back restores PEFT's config
  if (!embedding_modules.empty()) cfg[kEmbeddingModulesKey] = std::move(embedding_modules);  // mlx-lm ignores it too
  out.config_text = text::DumpPythonJson(cfg, {.indent = 4, .sort_keys = true});
  return out;
}

}  // namespace pb::adapter::internal
