#include "app/extract_report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "text/size_text.h"

namespace pb::app {
namespace {

std::string_view KindName(const compose::ExtractModule& m) {
  switch (m.kind) {
    case compose::ExtractKind::kEmbeddingLora: return "embedding";
    case compose::ExtractKind::kSave: return m.layer == adapter::ModuleKind::kEmbedding ? "embedding (saved)" : "saved";
    default: return adapter::ModuleKindName(m.layer);
  }
}

std::string_view PolicyName(compose::EmbeddingPolicy p) {
  switch (p) {
    case compose::EmbeddingPolicy::kLora: return "lora";
    case compose::EmbeddingPolicy::kSkip: return "skip";
    default: return "save";
  }
}

std::string Fixed(double x, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, x);
  return buffer;
}

std::string Scientific(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.3g", x);
  return buffer;
}

std::string RankRule(const compose::ExtractPlan& plan) {
  const auto& o = plan.options;
  if (o.rank) return "rank " + std::to_string(*o.rank);
  if (o.energy) return "energy " + Fixed(*o.energy, 4) + " (rank ≤ " + std::to_string(o.max_rank) + ")";
  return "rank " + std::to_string(o.max_rank) + " (--max-rank)";
}

}  // namespace

compose::ExtractArguments ExtractArgumentsOf(const CommandLine& line) {
  compose::ExtractArguments a;
  a.rank = line.Value("rank");
  a.energy = line.Value("energy");
  a.max_rank = line.Value("max-rank");
  a.modules = line.Value("modules");
  a.embeddings = line.Value("embeddings");
  a.dtype = line.Value("dtype");
  return a;
}

std::optional<std::string> ExtractUsageProblem(const CommandLine& line) {
  if (!line.Has("out") && !line.Has("dry-run")) return "-o/--out is required (or --dry-run)";
  auto parsed = compose::ParseExtractArguments(ExtractArgumentsOf(line));
  if (!parsed.ok()) return parsed.error().message;
  return std::nullopt;
}

std::string_view ExtractHelpIntro() {
  return "usage: peft-bridge extract --base PATH|hf://REPO --tuned PATH|hf://REPO -o|--out DIR\n"
         "       [--rank N | --energy F] [--max-rank N] [--modules all-linear|NAMES] [--embeddings save|lora|skip]\n"
         "       [--dtype bf16|f16|f32] [--dry-run] [--json] [--force] [--base-config FILE] [--arch NAME]\n"
         "       [--naming-table FILE]... [--follow-links]\n"
         "\n"
         "Writes a PEFT LoRA adapter that turns the base into (an approximation of) the fine-tuned model, as\n"
         "mergekit-extract-lora does: per module the truncated SVD of W_tuned - W_base, with the singular values\n"
         "split as sqrt(S) into lora_A and lora_B, and r = lora_alpha per module (rank_pattern = alpha_pattern), so\n"
         "every module's scaling is exactly 1. The models are read module by module (both may be sharded, local or\n"
         "remote); one module's delta (float32) and its SVD workspace are held at a time. Modules that did not\n"
         "change are dropped; norms that changed are saved whole (modules_to_save), and so are the embeddings and\n"
         "the head by default; a decomposed layer's bias that changed becomes lora_B.bias (lora_bias). The SVD is a\n"
         "randomized subspace iteration run until the error of the rank-r result settles (docs/extract.md); each\n"
         "module's relative error ||dW - B.A|| / ||dW|| is reported.\n"
         "\n"
         "options:\n";
}

std::string RenderExtractPlanText(const compose::ExtractPlan& plan, bool dry_run) {
  size_t decomposed = 0, saved = 0;
  for (const auto& m : plan.modules) (m.kind == compose::ExtractKind::kSave ? saved : decomposed)++;
  std::string out = std::string(dry_run ? "would extract" : "extract") + ": " + std::to_string(decomposed) +
                    " module(s) to decompose, " + std::to_string(saved) + " to save if changed; " + RankRule(plan) +
                    ", embeddings " + std::string(PolicyName(plan.options.embeddings)) + ", " +
                    std::string(DtypeName(plan.dtype)) + (plan.arch.empty() ? std::string() : ", arch " + plan.arch) +
                    "\n";
  for (const auto& m : plan.modules) {
    out += "  " + m.path + " ";
    if (m.kind == compose::ExtractKind::kSave) out += "(" + std::string(KindName(m)) + ")\n";
    else
      out += "[" + std::to_string(m.in_features()) + " -> " + std::to_string(m.out_features()) + "] " +
             std::string(KindName(m)) + ", rank ≤ " + std::to_string(m.max_rank) + "\n";
  }
  if (!plan.left_out.empty()) out += "left out (not decomposed, not read): " + compose::ListText(plan.left_out) + "\n";
  if (!plan.skipped_embeddings.empty())
    out += "embeddings skipped (not read): " + compose::ListText(plan.skipped_embeddings) + "\n";
  out += "reads " + text::SizeText(plan.read_bytes) + " of the two models; holds one delta of at most " +
         text::SizeText(plan.largest_delta_elements * 4) + " (float32)\n";
  for (const auto& n : plan.notes) out += "note: " + n + "\n";
  return out;
}

std::string RenderExtractOutcomeText(const compose::ExtractPlan& plan, const compose::ExtractOutcome& outcome) {
  std::string out;
  double worst = 0;
  for (const auto& r : outcome.modules) {
    if (!r.changed) continue;
    if (r.kind == compose::ExtractKind::kSave) {
      out += "  " + r.path + ": saved\n";
      continue;
    }
    worst = std::max(worst, r.relative_error);
    out += "  " + r.path + ": rank " + std::to_string(r.rank) + ", energy kept " + Fixed(100 * r.energy_kept, 4) +
           "%, relative error " + Scientific(r.relative_error) + (r.bias ? ", bias" : "") + "\n";
  }
  out += "extracted " + std::to_string(outcome.decomposed) + " module(s) (r=" + std::to_string(outcome.max_rank) +
         ", worst relative error " + Scientific(worst) + "), saved " + std::to_string(outcome.saved) + ", " +
         std::to_string(outcome.unchanged) + " unchanged (dropped)\n";
  out += "wrote: " + std::string(compose::kExtractWeightsName) + " (" + text::SizeText(outcome.file_size()) + "), " +
         std::string(compose::kExtractConfigName) + "\n";
  (void)plan;
  return out;
}

std::string RenderExtractJson(const compose::ExtractPlan& plan, const compose::ExtractOutcome* outcome) {
  nlohmann::ordered_json j;
  j["ok"] = true;
  j["dryRun"] = outcome == nullptr;
  j["arch"] = plan.arch.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(plan.arch);
  j["dtype"] = std::string(DtypeName(plan.dtype));
  j["embeddings"] = std::string(PolicyName(plan.options.embeddings));
  if (plan.options.rank) j["rank"] = *plan.options.rank;
  if (plan.options.energy) j["energy"] = *plan.options.energy;
  j["maxRank"] = plan.options.max_rank;
  j["readBytes"] = plan.read_bytes;
  j["largestDeltaBytes"] = plan.largest_delta_elements * 4;
  j["modules"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < plan.modules.size(); ++i) {
    const auto& m = plan.modules[i];
    nlohmann::ordered_json e{{"path", m.path}, {"kind", std::string(KindName(m))}};
    if (m.kind != compose::ExtractKind::kSave) {
      e["inFeatures"] = m.in_features();
      e["outFeatures"] = m.out_features();
      e["maxRank"] = m.max_rank;
    }
    if (outcome) {
      const auto& r = outcome->modules[i];
      e["changed"] = r.changed;
      if (r.changed && m.kind != compose::ExtractKind::kSave) {
        e["rank"] = r.rank;
        e["energyKept"] = r.energy_kept;
        e["relativeError"] = r.relative_error;
        e["bias"] = r.bias;
        e["iterations"] = r.iterations;
      }
    }
    j["modules"].push_back(std::move(e));
  }
  j["leftOut"] = plan.left_out;
  j["skippedEmbeddings"] = plan.skipped_embeddings;
  if (outcome) {
    j["r"] = outcome->max_rank;
    j["decomposed"] = outcome->decomposed;
    j["saved"] = outcome->saved;
    j["unchanged"] = outcome->unchanged;
    j["files"] = {{{"name", std::string(compose::kExtractWeightsName)}, {"bytes", outcome->file_size()}},
                  {{"name", std::string(compose::kExtractConfigName)}, {"bytes", outcome->config_text.size()}}};
  }
  j["notes"] = plan.notes;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace pb::app
