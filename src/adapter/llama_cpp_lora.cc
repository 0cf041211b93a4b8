#include "adapter/llama_cpp_lora.h"

#include <set>

#include "adapter/tensor_ops.h"

namespace pb::adapter::internal {

Result<LlamaCppLora> PlanLlamaCppLora(const Adapter& adapter, const WriteOptions& options, AdapterFormat format) {
  const NamingTables& tables = TablesOf(options.tables);
  PB_ASSIGN_OR_RETURN(auto chosen, ChooseArch(tables, options.arch ? options.arch : adapter.arch, options.base_config));
  const ArchTable* arch = chosen;
  if (!arch) {
    std::vector<std::string> paths;
    for (const auto& m : adapter.modules) paths.push_back(m.path);
    arch = tables.Detect(paths);
  }
  // What a refusal for want of the base config adds: where to find it (app::ChooseBaseConfig's hint).
  const std::string hint = options.base_config_hint.empty() ? "" : " (" + options.base_config_hint + ")";
  if (!arch)
    return MakeError(ErrorCode::InvalidArgument,
                     "no naming table matches this adapter's modules; pass --arch or --base-config" + hint);
  if (arch->gguf_arch.empty()) {
    // The table was chosen (by --arch, the base config or the module names) but no llama.cpp converter was
    // checked for it: every tensor would be refused, and the file would name no architecture.
    std::string supported;
    for (const auto& t : tables.arches())
      if (!t.gguf_arch.empty()) supported += (supported.empty() ? "" : ", ") + t.name;
    const std::string how = !chosen        ? "matched by the adapter's module names"
                            : options.arch ? "named by --arch"
                            : adapter.arch ? "the adapter's naming table"
                                           : "from the base config";
    return MakeError(ErrorCode::InvalidArgument,
                     "llama.cpp's converter has no architecture for the naming table `" + arch->name + "` (" + how +
                         "); the tables with one: " + supported +
                         (chosen ? "" : "; pass --arch or --base-config if the base is one of them" + hint));
  }
  LlamaCppLora out;
  out.arch = arch;
  const FormatTable& table = BuiltinFormatTable(format);
  auto reject = [&](const std::string& canonical, const std::string& reason) {
    out.mappings.push_back({canonical, "", "rejected", reason});
  };
  for (const auto& e : adapter.extras)
    reject(e.key, "llama.cpp's LoRA converter refuses non-LoRA tensors (" + DescribeExtra(e) +
                      "); merge it into the base model instead");

  std::set<double> alphas;
  for (const auto& m : adapter.modules)
    if (!m.experts) alphas.insert(m.settings.alpha);  // experts factors are refused below
  // llama.cpp reads alpha 0 as "no alpha / rank scaling" (scale 1), PEFT's lora_alpha 0 as scaling 0: fold then too.
  const bool fold = adapter.config.use_rslora || alphas.size() > 1 || (alphas.size() == 1 && *alphas.begin() == 0);
  out.heads = ConfigInt(options.base_config, "num_attention_heads").value_or(0);
  out.kv_heads = ConfigInt(options.base_config, "num_key_value_heads").value_or(out.heads);

  for (const auto& m : adapter.modules) {
    const bool emb = m.shape == LoraShape::kEmbedding;
    const std::string a_key = PeftKeyFor(m.path, emb ? PeftRole::kEmbeddingA : PeftRole::kLoraA);
    const std::string b_key = PeftKeyFor(m.path, emb ? PeftRole::kEmbeddingB : PeftRole::kLoraB);
    auto reject_module = [&](const std::string& reason) {
      reject(a_key, reason);
      reject(b_key, reason);
      if (m.b_bias) reject(PeftKeyFor(m.path, PeftRole::kLoraBBias), reason);
      if (m.magnitude) reject(PeftKeyFor(m.path, PeftRole::kMagnitude), reason);
    };
    if (m.experts) {
      reject_module(ExpertsNotHeldReason("llama.cpp", *m.experts));
      continue;
    }
    auto match = tables.MatchHf(*arch, m.path);
    if (!match || !match->gguf) {
      reject_module("llama.cpp's " + arch->gguf_arch + " model has no tensor for `" + m.path + "`");
      continue;
    }
    if (m.magnitude) {
      reject_module("llama.cpp cannot apply DoRA; merge the adapter instead");
      continue;
    }
    if (m.b_bias) {
      reject_module("llama.cpp's LoRA has no lora_B bias");
      continue;
    }
    if (m.shape == LoraShape::kConv) {
      reject_module("llama.cpp has no convolution LoRA");
      continue;
    }
    Tensor a = m.a, b = m.b;
    std::string a_action = "copy", b_action = "copy";
    if (fold) {
      PB_ASSIGN_OR_RETURN(auto scaled, ScaleTensor(b, m.settings.scaling));
      b = std::move(scaled);
      b_action = "fold scale";
    }
    if (match->tmpl->gguf_permute && !emb) {
      if (out.heads == 0) {
        reject_module(
            "llama.cpp reorders this weight's rows by attention head; pass --base-config so the head count is known" +
            hint);
        continue;
      }
      PB_ASSIGN_OR_RETURN(auto order, GgufRowOrder(*match->tmpl->gguf_permute, b.shape[0], out.heads, out.kv_heads));
      PB_ASSIGN_OR_RETURN(auto permuted, PermuteRows(b, order));
      b = std::move(permuted);
      const std::string permute =
          "permute rows (" + std::string(RowPermutationKindName(match->tmpl->gguf_permute->kind)) + ")";
      b_action = b_action == "copy" ? permute : b_action + ", " + permute;
    }
    if (emb) {
      PB_ASSIGN_OR_RETURN(auto t, Transpose2D(a));
      a = std::move(t);
      a_action = "transpose";
    }
    const std::string base = *match->gguf;
    auto add = [&](const std::string& canonical, std::string name, Tensor t, const std::string& action) {
      out.mappings.push_back({canonical, name, action, ""});
      out.tensors.push_back({std::move(name), std::move(t)});
    };
    add(a_key, base + table.Find(FormatRole::kLoraA)->suffix, std::move(a), a_action);
    add(b_key, base + table.Find(FormatRole::kLoraB)->suffix, std::move(b), b_action);
    out.module_paths.push_back(m.path);
  }
  if (!fold && !alphas.empty()) out.alpha = *alphas.begin();
  if (!options.base_config_note.empty()) out.notes.push_back(options.base_config_note);
  if (fold)
    out.notes.push_back(
        "per-module alpha, rsLoRA or lora_alpha 0: PEFT's scaling is folded into lora_b and adapter.lora.alpha is 0");
  return out;
}

}  // namespace pb::adapter::internal
