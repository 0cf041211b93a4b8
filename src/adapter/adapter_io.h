// Reading an adapter from any supported convention into the canonical Adapter, and writing an Adapter in
// any convention. The edges (CLI, JS) gather the files; nothing here touches a file. The weights come whole or
// as their header only: then the tensors read are references (tensor_ref.h) whose bytes consumers fetch by
// range when they use them (tensor_fetch.h), and only the few tiny tensors readers inspect (kohya's alphas:
// InlineTensorRanges) come with the header.
//
// Every input tensor is accounted for: mapped (copied or transformed) or rejected with a reason. With
// `strict`, any rejection fails the whole operation with UnresolvedTensor listing every unresolved key.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "adapter/adapter.h"
#include "adapter/format_table.h"
#include "adapter/naming_tables.h"
#include "core/writer.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace pb::adapter {

// An adapter directory's files, as the edge found them.
struct AdapterSource {
  std::string weights_name;                // file name, for messages
  std::span<const uint8_t> weights;        // the whole safetensors file (empty when `header` is given)
  std::optional<std::string> config;       // adapter_config.json text, when the directory has one
  std::optional<std::string> base_config;  // the base model's config.json text, when given
  // Header-only reading: the weights file's validated header (coverage checked against the file's size) and
  // the bytes of InlineTensorRanges(*header), concatenated in that order.
  const Header* header = nullptr;
  std::span<const uint8_t> inline_bytes;
  // A .gguf adapter read header-only: its parsed header (gguf/gguf_reader.h); `header` and `inline_bytes` are
  // then unused (its tensors are fetched by range). A whole .gguf file in `weights` is recognised by its magic.
  const gguf::GgufFile* gguf = nullptr;
};

struct ReadOptions {
  std::optional<AdapterFormat> format;  // detected from keys and config when absent
  std::optional<std::string> arch;      // a naming table (name, model_type or architectures value)
  bool strict = false;
  const NamingTables* tables = nullptr;  // NamingTables::Builtin() when null
};

struct ReadResult {
  Adapter adapter;
  std::vector<TensorMapping> mappings;  // input tensor -> canonical PEFT key (without prefix)
  // ‖ΔW‖ per module, when computed by a DeltaNormPass (referenced factors); else the report computes them
  // from the held factors.
  std::vector<double> delta_norms;
};

Result<ReadResult> ReadAdapter(const AdapterSource& source, const ReadOptions& options);

// The format an adapter's files are in, from the config's keys, then the tensor keys.
Result<AdapterFormat> DetectFormat(const Header& header, const std::optional<std::string>& config);

// The error for a directory holding only a pickled adapter_model.bin.
Error PickleAdapterError(const std::string& file_name);

// A safetensors file to write: tensors with their bytes (or references to fetch them by), metadata, order.
struct SafetensorsOutput {
  std::vector<TensorSpec> tensors;
  std::vector<std::vector<uint8_t>> data;   // per tensor, same order (empty where refs holds a reference)
  std::vector<std::optional<Tensor>> refs;  // per tensor when not empty: a referenced tensor, fetched when written
  std::optional<Metadata> metadata;
  TensorOrder order = TensorOrder::kReference;
  // Appends data (held tensor) or a reference; the spec is the caller's.
  void Add(Tensor t);
  bool IsReference(size_t i) const { return i < refs.size() && refs[i].has_value(); }
};
Result<WritePlan> PlanSafetensors(const SafetensorsOutput& output);
// Writes the whole file to the sink (header first, then data in plan order). Every tensor must be held; with
// references use SafetensorsEmitter (safetensors_emitter.h).
Status EmitSafetensors(const SafetensorsOutput& output, ByteSink& sink);

// A .gguf file to write (the gguf format): its keys and tensors, held or referenced, each encoded in its slot's
// ggml type when it is written (gguf_emitter.h).
struct GgufOutput {
  std::vector<gguf::KeyValue> keys;
  std::vector<gguf::TensorSlot> slots;  // name, shape, type; in file order
  std::vector<Tensor> tensors;          // same order
};

struct WriteOptions {
  bool strict = false;
  gguf::TensorType gguf_outtype = gguf::TensorType::kF32;  // gguf: convert_lora_to_gguf.py's --outtype
  std::optional<std::string> weights_name;  // the weights file's name when the user chose it (translate OUT.gguf)
  bool compat_pre_014 = false;              // PEFT < 0.14 rejects unknown config keys: write only theirs
  std::optional<std::string> base_config;   // head counts (GGUF row order), layer count (mlx num_layers)
  // Where base_config came from when the user did not name it (app::ChooseBaseConfig's note: a line of the
  // output's notes), or, when none was found, what to pass (its hint: added to each refusal that needs it).
  std::string base_config_note, base_config_hint;
  std::optional<std::string> arch;
  const NamingTables* tables = nullptr;
  // translate: write the rest when tensors are dropped (--allow-partial); otherwise Translate refuses (CheckDropped).
  bool allow_partial = false;
};

struct AdapterOutput {
  std::string weights_name;
  SafetensorsOutput weights;       // the weights file, unless it is a .gguf file:
  std::optional<GgufOutput> gguf;  // the gguf format's (then `weights` is empty)
  std::optional<std::string> config_name;
  std::string config_text;
  std::vector<TensorMapping> mappings;  // canonical PEFT key -> output tensor (or rejected)
  std::vector<std::string> notes;
};

Result<AdapterOutput> WriteAdapter(const Adapter& adapter, AdapterFormat to, const WriteOptions& options);

}  // namespace pb::adapter
