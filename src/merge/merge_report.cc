#include "merge/merge_report.h"

#include <algorithm>
#include <cstdio>

#include "text/size_text.h"
#include "core/json.h"
#include "merge/quantize_plan.h"

namespace pb::merge {

namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

std::string QuantHeadline(const QuantizePlan& q) {
  const QuantizeOptions& o = q.options;
  std::string what = std::string(QuantMethodName(o.method)) + " " + std::string(QuantSchemeName(o.scheme));
  if (o.scheme == QuantScheme::kGroup) what += " " + std::to_string(o.group_size);
  const std::string format = o.scheme == QuantScheme::kBlock ? "transformers fine-grained fp8"
                                                             : "compressed-tensors " + std::string(QuantFormatName(o));
  return what + " (" + format + "): " + std::to_string(q.quantized.size()) + " weight(s), " +
         std::to_string(q.kept.size()) + " Linear weight(s) kept";
}

}  // namespace

std::string RenderMergeJson(const MergeSummary& s) {
  Json j = Json::object();
  j["ok"] = true;
  j["dryRun"] = s.dry_run;
  j["unmerge"] = s.unmerge;
  j["arch"] = s.plan->arch ? Json(*s.plan->arch) : Json(nullptr);
  j["modulesMatched"] = s.plan->modules_matched;
  j["tensorsMerged"] = s.plan->tensors_merged;
  Json unmatched = Json::array();
  for (const auto& r : s.adapter->adapter.rejected) unmatched.push_back({{"tensor", r.name}, {"reason", r.reason}});
  j["unmatchedKeys"] = unmatched;
  Json files = Json::array();
  for (const auto& shard : s.plan->shards) files.push_back({{"name", shard.name}, {"bytes", shard.write.total_size()}});
  j["files"] = files;
  Json copied = Json::array();
  for (const auto& name : s.copied) copied.push_back(name);
  j["copiedFiles"] = copied;
  j["totalSize"] = s.plan->total_tensor_bytes;
  j["bytesIn"] = s.source_bytes;
  j["bytesOut"] = s.plan->total_file_bytes;
  j["seconds"] = s.seconds;
  j["gbPerS"] = s.seconds > 0 ? static_cast<double>(s.source_bytes) / s.seconds / 1e9 : 0.0;
  j["peakMemory"] = s.peak_memory;
  j["peakWasmHeap"] = s.peak_wasm_heap ? Json(s.peak_wasm_heap) : Json(nullptr);
  Json notes = Json::array();
  for (const auto& n : s.plan->notes) notes.push_back(n);
  j["notes"] = notes;
  if (const auto& q = s.plan->quantize) {
    Json quant = Json::object();
    quant["method"] = std::string(QuantMethodName(q->options.method));
    quant["scheme"] = std::string(QuantSchemeName(q->options.scheme));
    quant["format"] = std::string(QuantFormatName(q->options));
    quant["groupSize"] = q->options.scheme == QuantScheme::kGroup ? Json(q->options.group_size) : Json(nullptr);
    Json names = Json::array(), kept = Json::array(), ignore = Json::array(), errors = Json::array();
    for (const auto& n : q->quantized) names.push_back(n);
    for (const auto& [tensor, reason] : q->kept) kept.push_back({{"tensor", tensor}, {"reason", reason}});
    for (const auto& n : q->ignore) ignore.push_back(n);
    for (const auto& e : s.quant_errors)
      errors.push_back({{"tensor", e.tensor}, {"maxAbs", e.max_abs}, {"rms", e.rms()}, {"relative", e.relative()}});
    quant["quantized"] = names;
    quant["kept"] = kept;
    quant["ignore"] = ignore;
    quant["warnings"] = q->warnings;
    quant["errors"] = errors;
    j["quantization"] = quant;
  }
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string RenderMergePlanText(const MergeSummary& s) {
  const std::string arch = s.plan->arch ? " (architecture " + *s.plan->arch + ")" : std::string();
  std::string out =
      std::string(s.dry_run ? "would " : "") +
      (s.convert ? "convert the model, no adapter" + arch + "\n"
                 : std::string(s.unmerge ? "unmerge " : "merge ") + std::to_string(s.plan->modules_matched) +
                       " module(s) into " + std::to_string(s.plan->tensors_merged) + " tensor(s)" + arch + "\n");
  for (const auto& shard : s.plan->shards)
    out += "  " + shard.name + ": " + std::to_string(shard.tensors.size()) + " tensors, " +
           text::SizeText(shard.write.total_size()) + "\n";
  if (!s.copied.empty()) {
    out += std::string("  ") + (s.dry_run ? "would copy " : "copy ") + std::to_string(s.copied.size()) +
           " other file(s) from the base:";
    for (const auto& name : s.copied) out += " " + name;
    out += "\n";
  }
  if (const auto& q = s.plan->quantize) {
    out += std::string("  ") + (s.dry_run ? "would quantize " : "quantize ") + QuantHeadline(*q) + "\n";
    for (const auto& line : KeptClassLines(*q)) out += "    keep " + line + "\n";
  }
  for (const auto& r : s.adapter->adapter.rejected) out += "  not applied " + r.name + ": " + r.reason + "\n";
  for (const auto& n : s.plan->notes) out += "note: " + n + "\n";
  return out;
}

std::string RenderMergeWarnings(const MergePlan& plan) {
  std::string out = plan.dropped_warnings;
  if (plan.quantize)
    for (const auto& w : plan.quantize->warnings) out += "warning: " + w + "\n";
  return out;
}

std::string RenderMergeOutcomeText(const MergeSummary& s) {
  if (s.dry_run) return "";
  const double rate = s.seconds > 0 ? static_cast<double>(s.source_bytes) / s.seconds : 0;
  std::string errors;
  if (!s.quant_errors.empty()) {
    // Per class of weights, the largest of each measure (--json has every weight's).
    struct ClassError {
      std::string weight_class;
      size_t count = 0;
      double max_abs = 0, rms = 0, relative = 0;
    };
    std::vector<ClassError> classes;
    for (const auto& e : s.quant_errors) {
      const std::string c = WeightClass(e.tensor);
      auto it = std::find_if(classes.begin(), classes.end(), [&](const ClassError& k) { return k.weight_class == c; });
      if (it == classes.end()) it = classes.insert(classes.end(), ClassError{c});
      ++it->count;
      it->max_abs = std::max(it->max_abs, e.max_abs);
      it->rms = std::max(it->rms, e.rms());
      it->relative = std::max(it->relative, e.relative());
    }
    errors = "dequantization error (max abs, RMS, relative; the largest in each class, --json has every weight's):\n";
    for (const auto& k : classes)
      errors += "  " + std::to_string(k.count) + " x `" + k.weight_class + "`: " + Sci(k.max_abs) + ", " + Sci(k.rms) +
                ", " + Sci(k.relative) + "\n";
  }
  return errors + text::SizeText(s.source_bytes) + " in " + Fixed(s.seconds, 2) + " s (" + text::RateText(rate) +
         "), peak memory " + PeakMemoryText(s) + "\n";
}

std::string PeakMemoryText(const MergeSummary& s) {
  std::string out;
  if (s.peak_memory) out = text::SizeText(s.peak_memory) + " process RSS";
  if (s.peak_wasm_heap) out += (out.empty() ? "" : ", ") + text::SizeText(s.peak_wasm_heap) + " WASM heap";
  return out.empty() ? "unknown" : out;
}

std::string RenderMergeText(const MergeSummary& s) { return RenderMergePlanText(s) + RenderMergeOutcomeText(s); }

}  // namespace pb::merge
