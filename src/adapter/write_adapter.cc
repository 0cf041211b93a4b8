// WriteAdapter: dispatch, the safetensors emission all formats share, and PEFT's own format.
#include "adapter/format_internal.h"
#include "text/python_json.h"

namespace pb::adapter {

Result<WritePlan> PlanSafetensors(const SafetensorsOutput& output) {
  return PlanWrite(output.tensors, output.metadata, output.order);
}

void SafetensorsOutput::Add(Tensor t) {
  if (t.held()) {
    data.push_back(std::move(t.bytes));
    if (!refs.empty()) refs.emplace_back();
    return;
  }
  refs.resize(data.size());
  data.emplace_back();
  refs.push_back(std::move(t));
}

Status EmitSafetensors(const SafetensorsOutput& output, ByteSink& sink) {
  PB_ASSIGN_OR_RETURN(auto plan, PlanSafetensors(output));
  StreamingWriter writer(std::move(plan), sink);
  PB_RETURN_IF_ERROR(writer.Begin());
  for (const auto& planned : writer.plan().tensors) {
    if (output.IsReference(planned.input_index))
      return MakeError(ErrorCode::InvalidArgument, "internal: `" + output.tensors[planned.input_index].name +
                                                       "` is a reference; write it with SafetensorsEmitter");
    const auto& bytes = output.data[planned.input_index];
    PB_RETURN_IF_ERROR(writer.Write(bytes));
  }
  return writer.Finish();
}

Result<AdapterOutput> WriteAdapter(const Adapter& adapter, AdapterFormat to, const WriteOptions& options) {
  Result<AdapterOutput> out = MakeError(ErrorCode::InvalidArgument, "unknown format");
  switch (to) {
    case AdapterFormat::kPeft: out = internal::WritePeft(adapter, options); break;
    case AdapterFormat::kMlx: out = internal::WriteMlx(adapter, options); break;
    case AdapterFormat::kKohya: out = internal::WriteKohya(adapter, options); break;
    case AdapterFormat::kGgufNames: out = internal::WriteGgufNames(adapter, options); break;
    case AdapterFormat::kGguf: out = internal::WriteGguf(adapter, options); break;
    case AdapterFormat::kDiffusersAttnProc:
      return MakeError(ErrorCode::InvalidArgument,
                       "diffusers' attention-processor format is read only; write peft or kohya instead");
  }
  if (out.ok() && options.weights_name) out->weights_name = *options.weights_name;
  if (!out.ok() || !options.strict) return out;
  std::vector<const TensorMapping*> rejected;
  for (const auto& m : out->mappings)
    if (m.to.empty()) rejected.push_back(&m);
  if (rejected.empty()) return out;
  std::string message = std::to_string(rejected.size()) + " tensor(s) cannot be written as " +
                        std::string(FormatName(to)) + " (--strict):";
  for (const auto* m : rejected) message += "\n  " + m->from + ": " + m->reason;
  return MakeError(ErrorCode::UnresolvedTensor, message, rejected.front()->from);
}

namespace internal {

namespace {

// Keys PEFT < 0.14 does not know are dropped when they hold their default; a non-default value would be
// rejected (TypeError) or, worse, change the numbers, so it is an error that names the field.
Result<Json> CompatDocument(const Json& doc, std::vector<std::string>& notes) {
  const Json defaults = DefaultLoraConfigDocument();
  Json out = Json::object();
  for (const auto& [key, value] : doc.items()) {
    if (IsPre014LoraField(key)) {
      out[key] = value;
      continue;
    }
    bool is_default = defaults.contains(key)
                          ? defaults[key] == value
                          : (value.is_null() || value == false || (value.is_structured() && value.empty()));
    if (key == "peft_version" || is_default) {
      notes.push_back("dropped `" + key + "` for PEFT < 0.14");
      continue;
    }
    return MakeError(ErrorCode::UnsupportedAdapter, "`" + key + "` = " + value.dump() +
                                                        " cannot be written for PEFT < 0.14: that release rejects the "
                                                        "field, and dropping it would change the adapter's meaning");
  }
  return out;
}

}  // namespace

Result<AdapterOutput> WritePeft(const Adapter& adapter, const WriteOptions& options) {
  AdapterOutput out;
  const FormatTable& table = BuiltinFormatTable(AdapterFormat::kPeft);
  out.weights_name = table.weights_file;
  out.config_name = table.config_file;
  const std::string prefix = table.prefixes.front();
  auto add = [&](std::string canonical, const Tensor& t) {
    out.weights.tensors.push_back({prefix + canonical, t.dtype, t.shape});
    out.weights.Add(t);
    out.mappings.push_back({canonical, prefix + canonical, "copy", ""});
  };
  for (const auto& m : adapter.modules) {
    const bool emb = m.shape == LoraShape::kEmbedding;
    add(PeftKeyFor(m.path, emb ? PeftRole::kEmbeddingA : PeftRole::kLoraA), m.a);
    add(PeftKeyFor(m.path, emb ? PeftRole::kEmbeddingB : PeftRole::kLoraB), m.b);
    if (m.b_bias) add(PeftKeyFor(m.path, PeftRole::kLoraBBias), *m.b_bias);
    if (m.magnitude) add(PeftKeyFor(m.path, PeftRole::kMagnitude), *m.magnitude);
  }
  for (const auto& e : adapter.extras) add(e.key, e.tensor);
  out.weights.metadata = table.metadata;
  Json doc = adapter.config.document;
  if (options.compat_pre_014) {
    PB_ASSIGN_OR_RETURN(auto compat, CompatDocument(doc, out.notes));
    doc = std::move(compat);
  }
  out.config_text = text::DumpPythonJson(doc);
  return out;
}

}  // namespace internal
}  // namespace pb::adapter
