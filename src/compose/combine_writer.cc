#include "compose/combine_writer.h"

#include <algorithm>

#include "compose/combine_math.h"
#include "compose/float_values.h"

namespace pb::compose {

CombineWriter::CombineWriter(const CombinePlan& plan, const std::vector<CombineInput>& inputs, ByteSink& sink)
    : plan_(plan),
      inputs_(inputs),
      sink_(sink),
      fetch_(inputs.size()),
      awaited_(inputs.size(), 0),
      outcomes_(plan.modules.size()) {
  item_of_tensor_.assign(plan.output.weights.tensors.size(), 0);
  for (size_t m = 0; m < plan.modules.size(); ++m)
    item_of_tensor_[plan.modules[m].a_tensor] = item_of_tensor_[plan.modules[m].b_tensor] = m;
  for (size_t e = 0; e < plan.extras.size(); ++e) item_of_tensor_[plan.extras[e].tensor] = plan.modules.size() + e;
  held_.resize(plan.output.weights.tensors.size());
}

CombineWriter::~CombineWriter() = default;

Status CombineWriter::Begin() {
  PB_ASSIGN_OR_RETURN(auto plan, adapter::PlanSafetensors(plan_.output.weights));
  writer_ = std::make_unique<StreamingWriter>(std::move(plan), sink_);
  PB_RETURN_IF_ERROR(writer_->Begin());
  return Advance();
}

// The item's input tensors: for a module, each input's A and B; for an extra, each input's copy.
static std::vector<std::vector<const adapter::Tensor*>> InputTensors(const CombinePlan& plan,
                                                                     const std::vector<CombineInput>& inputs,
                                                                     size_t item) {
  std::vector<std::vector<const adapter::Tensor*>> per_input(inputs.size());
  if (item < plan.modules.size()) {
    const PlannedModule& pm = plan.modules[item];
    for (size_t i : pm.inputs) {
      const adapter::LoraModule* m = inputs[i].adapter->FindModule(pm.path);
      per_input[i] = {&m->a, &m->b};
    }
  } else {
    const PlannedExtra& pe = plan.extras[item - plan.modules.size()];
    for (size_t i : pe.inputs)
      for (const auto& e : inputs[i].adapter->extras)
        if (e.key == pe.key) per_input[i] = {&e.tensor};
  }
  return per_input;
}

void CombineWriter::Renumber() {
  needs_.clear();
  for (size_t i = 0; i < fetch_.size(); ++i) {
    awaited_[i] = 0;
    for (const auto& r : fetch_[i].needs()) {
      needs_.push_back({i, r});
      awaited_[i] += r.size();
    }
  }
}

Status CombineWriter::Compute(size_t item) {
  for (auto& h : held_) std::vector<uint8_t>().swap(h);  // released, capacity included (an assignment keeps it)
  uint64_t held_bytes = 0;
  for (const auto& f : fetch_) held_bytes += f.held_bytes();
  peak_ = std::max(peak_, held_bytes);
  if (item < plan_.modules.size()) {
    const PlannedModule& pm = plan_.modules[item];
    std::vector<Term> terms;
    for (size_t i : pm.inputs) {
      const adapter::LoraModule* m = inputs_[i].adapter->FindModule(pm.path);
      Term t;
      PB_ASSIGN_OR_RETURN(t.a, MatrixOf(*fetch_[i].get(0)));
      PB_ASSIGN_OR_RETURN(t.b, MatrixOf(*fetch_[i].get(1)));
      t.weight = plan_.options.weights[i];
      t.scaling = m->settings.scaling;
      t.dtype = m->a.dtype;
      t.adapter = i;
      terms.push_back(std::move(t));
    }
    ModuleMath math{plan_.options.method,    pm.rank,
                    plan_.options.density,   plan_.options.majority_sign,
                    plan_.options.svd_clamp, plan_.options.peft_compat,
                    plan_.options.seed,      item};
    auto combined = CombineModule(terms, math);
    if (!combined.ok()) {
      Error e = combined.error();
      e.message = pm.path + ": " + e.message;
      return e;
    }
    // The error of what is written: the factors rounded to the output dtype, applied as PEFT applies them.
    RoundAll(combined->a, plan_.dtype);
    RoundAll(combined->b, plan_.dtype);
    PB_RETURN_IF_ERROR(RequireFinite(combined->a, plan_.dtype, pm.path));
    PB_RETURN_IF_ERROR(RequireFinite(combined->b, plan_.dtype, pm.path));
    const bool cat_form =
        math.method == CombineMethod::kCat ||
        (math.method == CombineMethod::kLinear && !CombinesFactorsSeparately(math.method, math.peft_compat));
    outcomes_[item] = {RelativeError(terms, combined->a, combined->b, plan_.runtime_scale, cat_form),
                       combined->kept_energy};
    held_[pm.a_tensor] = BytesOf(combined->a, plan_.dtype);
    held_[pm.b_tensor] = BytesOf(combined->b, plan_.dtype);
  } else if (const PlannedExtra& pe = plan_.extras[item - plan_.modules.size()]; pe.base_copy) {
    // The base's own weight (save_embedding_layers): PEFT loads it over the model's, so it is written as it is.
    // Weighing it (w·W_emb) would replace the model's embedding by a scaled one; inputs that disagree are refused.
    const adapter::Tensor* first = fetch_[pe.inputs[0]].get(0);
    for (size_t k = 1; k < pe.inputs.size(); ++k)
      if (fetch_[pe.inputs[k]].get(0)->bytes != first->bytes)
        return MakeError(ErrorCode::UnsupportedAdapter,
                         "`" + pe.key + "` is the base weight PEFT saves with a LoRA-targeted embedding, and `" +
                             inputs_[pe.inputs[0]].label + "` and `" + inputs_[pe.inputs[k]].label +
                             "` hold different ones: PEFT would load one over the other (the adapters were trained on "
                             "different base weights or vocabularies)");
    held_[pe.tensor] = first->bytes;
  } else {
    // A modules_to_save copy: Σ wᵢ·copyᵢ over the inputs that have it, in its dtype.
    std::optional<linalg::Matrix> sum;
    Dtype dtype = Dtype::F32;
    for (size_t i : pe.inputs) {
      const adapter::Tensor* t = fetch_[i].get(0);
      dtype = t->dtype;
      PB_ASSIGN_OR_RETURN(auto m, MatrixOf(*t));
      for (double& x : m.data()) x *= plan_.options.weights[i];
      if (!sum) sum = std::move(m);
      else
        for (size_t k = 0; k < m.data().size(); ++k) sum->data()[k] += m.data()[k];
    }
    RoundAll(*sum, dtype);
    PB_RETURN_IF_ERROR(RequireFinite(*sum, dtype, pe.key));
    held_[pe.tensor] = BytesOf(*sum, dtype);
  }
  for (auto& f : fetch_) f.Release();
  computed_ = item;
  return Status::Ok();
}

Status CombineWriter::Advance() {
  const auto& planned = writer_->plan().tensors;
  while (next_ < planned.size()) {
    const size_t tensor = planned[next_].input_index;
    const size_t item = item_of_tensor_[tensor];
    if (computed_ != item) {
      if (requested_ != item) {
        const auto per_input = InputTensors(plan_, inputs_, item);
        for (size_t i = 0; i < fetch_.size(); ++i) fetch_[i].Request(per_input[i]);
        requested_ = item;
        Renumber();
      }
      if (!needs_.empty()) return Status::Ok();  // waiting for its bytes
      PB_RETURN_IF_ERROR(Compute(item));
    }
    PB_RETURN_IF_ERROR(writer_->Write(held_[tensor]));
    std::vector<uint8_t>().swap(held_[tensor]);
    ++next_;
  }
  return Status::Ok();
}

Status CombineWriter::Supply(std::span<const uint8_t> bytes) {
  if (!writer_ || needs_.empty()) return MakeError(ErrorCode::InvalidArgument, "adapter bytes that were not asked for");
  for (size_t i = 0; i < fetch_.size() && !bytes.empty(); ++i) {
    if (awaited_[i] == 0) continue;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(awaited_[i], bytes.size()));
    PB_RETURN_IF_ERROR(fetch_[i].Supply(bytes.first(take)));
    awaited_[i] -= take;
    bytes = bytes.subspan(take);
  }
  if (!bytes.empty()) return MakeError(ErrorCode::InvalidArgument, "more adapter bytes than were asked for");
  bool done = true;
  for (uint64_t a : awaited_) done = done && a == 0;
  if (!done) return Status::Ok();
  needs_.clear();
  return Advance();
}

Status CombineWriter::Finish() {
  if (!writer_) return MakeError(ErrorCode::InvalidArgument, "Finish before Begin");
  if (next_ < writer_->plan().tensors.size())
    return MakeError(ErrorCode::InvalidArgument,
                     "the input bytes of `" +
                         plan_.output.weights.tensors[writer_->plan().tensors[next_].input_index].name +
                         "` were not supplied");
  return writer_->Finish();
}

}  // namespace pb::compose
