// Running a planned extraction (extract_plan.h), push-based: the job says which byte range of which model it
// needs next (NextRead), the edge reads it and pushes its bytes in chunks of any size; the job turns each
// module into adapter tensors as soon as its inputs are complete and writes them to the data sink, which
// receives the bytes of adapter_model.safetensors after the reserved header region, in file order. Finish
// gives the header (exactly plan.reserved_header bytes, for the region the edge reserved or prepends) and
// adapter_config.json.
//
// Per module, in plan order:
//  - decomposed: the base weight, the tuned weight (and both biases) are read; ΔW = W_tuned − W_base is held
//    as float32 (the only large buffer: rows × cols × 4 bytes), its truncated SVD taken
//    (linalg/truncated_svd.h), A = √S·Vᵀ and B = U·√S written (transposed for Conv1D and embeddings), then
//    the delta is released. A module whose delta and bias delta are exactly zero is dropped.
//  - saved: each tensor of both models is compared in pieces of at most 1 MiB read alternately (nothing held
//    but one piece); if any value differs, the tuned tensors are read again and written, converted.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compose/extract_plan.h"
#include "core/result.h"
#include "core/writer.h"

namespace pb::compose {

struct ExtractRead {
  bool tuned = false;  // which model
  size_t shard = 0;
  uint64_t begin = 0, end = 0;  // absolute byte range in the shard file
};

struct ExtractModuleReport {
  std::string path;
  ExtractKind kind = ExtractKind::kLora;
  bool changed = false;
  uint64_t rank = 0;          // decomposed modules: the rank written
  double energy_kept = 1;     // Σ_{i≤rank} σᵢ² / ‖ΔW‖²
  double relative_error = 0;  // ‖ΔW − B·A‖_F / ‖ΔW‖_F of the truncation (before rounding to the dtype)
  bool bias = false;          // lora_B.bias written
  int iterations = 0;         // the SVD's power iterations
};

struct ExtractOutcome {
  std::string header;       // reserved_header bytes: the length prefix, the JSON, spaces
  std::string config_text;  // adapter_config.json
  uint64_t data_size = 0;   // bytes written to the data sink
  uint64_t file_size() const { return header.size() + data_size; }
  std::vector<ExtractModuleReport> modules;  // plan order
  uint64_t max_rank = 0;                     // the config's r
  size_t decomposed = 0, saved = 0, unchanged = 0, biases = 0;
};

class ExtractJob {
 public:
  ExtractJob(const ExtractPlan& plan, ByteSink& data);
  ~ExtractJob();
  ExtractJob(const ExtractJob&) = delete;
  ExtractJob& operator=(const ExtractJob&) = delete;

  // The range to push next; nullopt once every input was given (then Finish).
  std::optional<ExtractRead> NextRead() const;
  // The next bytes of NextRead's range (a chunk must not run past it). When a module's inputs are complete its
  // tensors are made and written before this returns. Errors are sticky.
  Status Push(std::span<const uint8_t> bytes);
  uint64_t bytes_read() const;
  // The modules done so far (for progress), and the one being read.
  size_t modules_done() const;

  // After the last read. Errors: InvalidArgument (nothing changed in any decomposed module).
  Result<ExtractOutcome> Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pb::compose
