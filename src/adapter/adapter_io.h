// Reading an adapter from any supported convention into the canonical Adapter, and writing an Adapter in
// any convention. The edges (CLI, JS) gather the files as bytes; nothing here touches a file.
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

namespace pb::adapter {

// An adapter directory's files, as the edge found them.
struct AdapterSource {
  std::string weights_name;                // file name, for messages
  std::span<const uint8_t> weights;        // the whole safetensors file
  std::optional<std::string> config;       // adapter_config.json text, when the directory has one
  std::optional<std::string> base_config;  // the base model's config.json text, when given
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
};

Result<ReadResult> ReadAdapter(const AdapterSource& source, const ReadOptions& options);

// The format an adapter's files are in, from the config's keys, then the tensor keys.
Result<AdapterFormat> DetectFormat(const Header& header, const std::optional<std::string>& config);

// The error for a directory holding only a pickled adapter_model.bin.
Error PickleAdapterError(const std::string& file_name);

// A safetensors file to write: tensors with their bytes, metadata, order.
struct SafetensorsOutput {
  std::vector<TensorSpec> tensors;
  std::vector<std::vector<uint8_t>> data;  // per tensor, same order
  std::optional<Metadata> metadata;
  TensorOrder order = TensorOrder::kReference;
};
Result<WritePlan> PlanSafetensors(const SafetensorsOutput& output);
// Writes the whole file to the sink (header first, then data in plan order).
Status EmitSafetensors(const SafetensorsOutput& output, ByteSink& sink);

struct WriteOptions {
  bool strict = false;
  bool compat_pre_014 = false;             // PEFT < 0.14 rejects unknown config keys: write only theirs
  std::optional<std::string> base_config;  // head counts (GGUF row order), layer count (mlx num_layers)
  std::optional<std::string> arch;
  const NamingTables* tables = nullptr;
};

struct AdapterOutput {
  std::string weights_name;
  SafetensorsOutput weights;
  std::optional<std::string> config_name;
  std::string config_text;
  std::vector<TensorMapping> mappings;  // canonical PEFT key -> output tensor (or rejected)
  std::vector<std::string> notes;
};

Result<AdapterOutput> WriteAdapter(const Adapter& adapter, AdapterFormat to, const WriteOptions& options);

}  // namespace pb::adapter
