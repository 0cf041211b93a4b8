// A llama.cpp LoRA adapter in a .gguf file (convert_lora_to_gguf.py's, or ours: translate --to gguf), read from its
// header (gguf/gguf_reader.h) with the tensors as references fetched by range, or from the whole file's bytes.
// The keys llama.cpp's loader requires are checked as it checks them (general.type = adapter, adapter.type = lora,
// adapter.lora.alpha a FLOAT32, general.architecture a STRING); the names, orientation, q/k row order and scaling
// are the layout gguf-names reads (read_gguf_names.cc).
//
// Dtypes: when every LoRA tensor is F32, or every one F16, or every one BF16, the adapter keeps that dtype and the
// stored bytes unchanged; otherwise (Q8_0, or a mix such as q8_0's F16 fallback for short rows) every tensor is
// decoded to F32, exactly.
#include "adapter/format_internal.h"
#include "adapter/tensor_ops.h"
#include "gguf/gguf_reader.h"

namespace pb::adapter::internal {

namespace {

std::optional<Dtype> SameBytesDtype(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kF32: return Dtype::F32;
    case gguf::TensorType::kF16: return Dtype::F16;
    case gguf::TensorType::kBF16: return Dtype::BF16;
    case gguf::TensorType::kQ8_0: return std::nullopt;
  }
  return std::nullopt;
}

bool IsLoraName(std::string_view name) { return name.ends_with(".lora_a") || name.ends_with(".lora_b"); }

Error KeyError(const std::string& file, const gguf::GgufKey* key, std::string_view name, std::string what) {
  return MakeError(ErrorCode::UnsupportedAdapter, file + ": " + what, std::nullopt,
                   key ? std::optional<uint64_t>(key->offset) : std::nullopt);
}

// What llama.cpp's adapter loader requires of the keys (llama_adapter_lora_init_impl; a wrong type aborts it).
Status CheckAdapterKeys(const std::string& file, const gguf::GgufFile& gguf) {
  auto require_string = [&](std::string_view key, std::optional<std::string_view> value) -> Status {
    const gguf::GgufKey* k = gguf.Find(key);
    if (!k)
      return KeyError(file, k, key,
                      "GGUF key `" + std::string(key) + "` is missing; a llama.cpp LoRA adapter has " +
                          (value ? "`" + std::string(key) + "` = `" + std::string(*value) + "`" : "it"));
    if (k->type != gguf::ValueType::kString)
      return KeyError(file, k, key,
                      "GGUF key `" + std::string(key) + "` is " + std::string(gguf::ValueTypeName(k->type)) +
                          "; llama.cpp reads it as a STRING");
    if (value && k->text != *value) {
      std::string what =
          "GGUF key `" + std::string(key) + "` is " + gguf::Quote(k->text) + ", not `" + std::string(*value) + "`";
      if (key == "general.type") what += ": this .gguf file is not a LoRA adapter (a model, or another kind of file)";
      else what += ": peft-bridge reads LoRA adapters only";
      return KeyError(file, k, key, what);
    }
    return Status::Ok();
  };
  PB_RETURN_IF_ERROR(require_string("general.type", "adapter"));
  PB_RETURN_IF_ERROR(require_string("adapter.type", "lora"));
  PB_RETURN_IF_ERROR(require_string("general.architecture", std::nullopt));
  if (const gguf::GgufKey* alpha = gguf.Find("adapter.lora.alpha"); alpha && alpha->type != gguf::ValueType::kFloat32)
    return KeyError(file, alpha, "adapter.lora.alpha",
                    "GGUF key `adapter.lora.alpha` is " + std::string(gguf::ValueTypeName(alpha->type)) +
                        "; llama.cpp reads it as a FLOAT32");
  for (const char* ours : {kArchKey, kModulePathsKey, kPeftConfigKey})
    if (const gguf::GgufKey* k = gguf.Find(ours); k && k->type != gguf::ValueType::kString)
      return KeyError(file, k, ours,
                      "GGUF key `" + std::string(ours) + "` is " + std::string(gguf::ValueTypeName(k->type)) +
                          "; peft-bridge writes it as a STRING");
  return Status::Ok();
}

}  // namespace

Result<ReadResult> ReadGguf(ReadState& state, const gguf::GgufFile& gguf) {
  const std::string& file_name = state.source.weights_name;
  PB_RETURN_IF_ERROR(CheckAdapterKeys(file_name, gguf));
  // One dtype for the adapter: the stored one when all LoRA tensors share F32, F16 or BF16, else F32.
  std::optional<gguf::TensorType> common;
  bool mixed = false;
  for (const auto& t : gguf.tensors) {
    if (!IsLoraName(t.name)) continue;
    auto type = gguf::TensorTypeFromId(t.type);
    if (!type) continue;  // rejected below
    if (common && *common != *type) mixed = true;
    common = common.value_or(*type);
  }
  const bool decode = mixed || (common && !SameBytesDtype(*common));
  if (decode) {
    std::string types;
    for (auto type : {gguf::TensorType::kF32, gguf::TensorType::kF16, gguf::TensorType::kBF16, gguf::TensorType::kQ8_0})
      for (const auto& t : gguf.tensors)
        if (IsLoraName(t.name) && t.type == static_cast<uint32_t>(type)) {
          types += (types.empty() ? "" : ", ") + std::string(gguf::TensorTypeName(type));
          break;
        }
    state.result.adapter.notes.push_back("the LoRA tensors are stored as " + types +
                                         " (ggml types): read as F32, exactly (Q8_0 as q * fp16(d))");
  }

  LlamaCppFile file;
  file.what = "GGUF key ";
  file.value = [&](std::string_view key) -> std::optional<std::string> {
    const gguf::GgufKey* k = gguf.Find(key);
    if (!k) return std::nullopt;
    return k->Render();
  };
  file.tensor_count = gguf.tensors.size();
  file.name = [&](size_t i) { return gguf.tensors[i].name; };
  file.load = [&](size_t i) -> Result<Tensor> {
    const gguf::GgufTensorInfo& info = gguf.tensors[i];
    auto type = gguf::TensorTypeFromId(info.type);
    if (!type) {
      auto traits = gguf::GgmlType(info.type);
      return MakeError(ErrorCode::UnsupportedDtype,
                       "ggml type " + std::string(traits ? traits->name : "?") +
                           ": peft-bridge reads LoRA tensors stored as F32, F16, BF16 or Q8_0",
                       info.name);
    }
    const std::vector<uint64_t> shape = info.Shape();
    const std::optional<Dtype> same = decode ? std::nullopt : SameBytesDtype(*type);
    const ByteRange range{gguf.TensorBegin(i), gguf.TensorEnd(i)};
    if (state.source.gguf) {  // header-only: a reference, fetched by range when used
      Tensor t{same.value_or(Dtype::F32), shape, {}, TensorRef{range, shape, {}, std::nullopt}};
      if (!same && *type != gguf::TensorType::kF32) t.ref->stored_gguf_type = *type;
      return t;
    }
    std::span<const uint8_t> bytes = state.source.weights.subspan(range.begin, range.size());
    if (same || *type == gguf::TensorType::kF32)
      return Tensor{same.value_or(Dtype::F32), shape, std::vector<uint8_t>(bytes.begin(), bytes.end()), std::nullopt};
    return DecodeGguf(*type, shape, bytes);
  };
  return ReadLlamaCppLayout(state, file);
}

}  // namespace pb::adapter::internal
