// Summaries of a merge for the CLIs (text, or JSON with --json). Beside the merge they describe, below both CLIs so
// they print alike; sizes in the text are text::SizeText's, exact bytes are in the JSON.
#pragma once

#include <string>
#include <vector>

#include "adapter/adapter_io.h"
#include "merge/merge_plan.h"
#include "merge/quantize_stream.h"

namespace pb::merge {

struct MergeSummary {
  const MergePlan* plan;
  const adapter::ReadResult* adapter;
  uint64_t source_bytes;  // base tensor bytes read
  double seconds;         // wall time of the whole command
  uint64_t peak_memory;   // the process's peak RSS (0 if unknown: a browser)
  bool dry_run;
  bool unmerge;
  std::vector<std::string> copied = {};       // base files copied into the output, in order
  std::vector<QuantError> quant_errors = {};  // --quantize: each quantized weight's error, once written
  bool convert = false;                       // `convert IN OUT --quantize`: the model's own weights, no adapter
  uint64_t peak_wasm_heap = 0;                // WASM: the module's heap at its largest (it only grows); 0 natively
};

// The text summary is the plan, printed before the work starts, and the outcome, printed once it is done:
// RenderMergeText = RenderMergePlanText + RenderMergeOutcomeText.
std::string RenderMergeText(const MergeSummary& s);
// What the merge does: modules and tensors, each output shard (tensors, size), the base files copied, what is not
// applied, the notes. Needs no measurement (seconds and peak memory are not read).
std::string RenderMergePlanText(const MergeSummary& s);
// The `warning:` lines the CLIs print on stderr once the plan is made: the adapter tensors not applied (with
// --allow-partial; MergePlan::dropped_warnings), then --quantize's weights kept unquantized for a reason the
// libraries' defaults do not have, one line per class (QuantizePlan::warnings). "" when none.
std::string RenderMergeWarnings(const MergePlan& plan);
// "1.16 GB in 2.00 s (580 MB/s), peak memory 120 MB process RSS\n" after a merge (the npm CLI's adds
// ", 45.1 MB WASM heap": its RSS holds the heap and Node's own); "" for a dry run.
std::string RenderMergeOutcomeText(const MergeSummary& s);
// The measures of peak memory, each named: "120 MB process RSS", "123 MB process RSS, 45.1 MB WASM heap", or
// "45.1 MB WASM heap" where no process is measured (a browser); "unknown" when none is.
std::string PeakMemoryText(const MergeSummary& s);
// {"ok":true,"dry_run","unmerge","arch","modules_matched","tensors_merged","unmatched_keys":[...],
//  "files":[{"name","bytes"}],"copied_files":[names],"total_size","bytes_in","bytes_out","seconds","gb_per_s","peak_memory"
//  (process RSS), "peak_wasm_heap" (null natively),"notes":[...], with --quantize
//  "quantization":{"method","scheme","format","groupSize","quantized":[names],"kept":[{"tensor","reason"}],
//  "ignore":[modules],"warnings":[lines],"errors":[{"tensor","maxAbs","rms","relative"}]}} (camelCase keys, as every
//  JSON output)
std::string RenderMergeJson(const MergeSummary& s);

}  // namespace pb::merge
