#include "compose/lora_serving.h"

#include <algorithm>
#include <string>

#include "adapter/adapter.h"
#include "adapter/tensor_fetch.h"
#include "compose/combine_math.h"
#include "compose/float_values.h"
#include "kernels/convert.h"
#include "kernels/lowrank.h"

namespace pb::compose {
namespace {

using adapter::ShapeText;

Error Invalid(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }

uint64_t Product(const std::vector<uint64_t>& shape, size_t from = 0) {
  uint64_t n = 1;
  for (size_t i = from; i < shape.size(); ++i) n *= shape[i];
  return n;
}

bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The factor's bytes as fp32 values (the merge's ToF32: 16-bit types widen exactly).
Result<std::vector<float>> F32Of(const std::vector<uint8_t>& bytes, Dtype dtype, uint64_t n) {
  std::vector<float> out(n);
  if (!kernels::ConvertElements(dtype, Dtype::F32, bytes.data(), out.data(), n))
    return MakeError(ErrorCode::UnsupportedDtype, "cannot widen " + std::string(DtypeName(dtype)) + " factors to F32");
  return out;
}


}  // namespace

Result<const adapter::LoraModule*> ServedModule(const adapter::Adapter& adapter, std::string_view name,
                                                std::string_view label) {
  std::string path(name);
  constexpr std::string_view kPrefix = "base_model.model.";
  if (name.substr(0, kPrefix.size()) == kPrefix) {
    path = std::string(name.substr(kPrefix.size()));
    if (auto key = adapter::ParsePeftLoraKey(path)) path = key->module;
  }
  const adapter::LoraModule* m = adapter.FindModule(path);
  if (!m && EndsWith(path, ".weight")) m = adapter.FindModule(std::string_view(path).substr(0, path.size() - 7));
  if (!m)
    return Invalid(std::string(label) + " has no LoRA module `" + std::string(name) + "` (" +
                   std::to_string(adapter.modules.size()) + " modules, e.g. `" +
                   (adapter.modules.empty() ? std::string() : adapter.modules.front().path) + "`)");
  auto unsupported = [&](const char* why) {
    return MakeError(ErrorCode::UnsupportedAdapter,
                     std::string(label) + ": module `" + m->path + "` " + why + ": its delta is not s·B·A");
  };
  if (m->magnitude) return unsupported("is a DoRA module");
  if (m->b_bias) return unsupported("has a lora_B.bias");
  if (m->shape == adapter::LoraShape::kExperts) return unsupported("wraps a fused experts parameter");
  return m;
}

adapter::ByteRange ModuleSpan(const adapter::LoraModule& m) {
  adapter::TensorFetch fetch;
  fetch.Request({&m.a, &m.b});
  adapter::ByteRange span{};
  bool first = true;
  for (const auto& r : fetch.needs()) {
    if (r.size() == 0) continue;
    span = first ? r : adapter::ByteRange{std::min(span.begin, r.begin), std::max(span.end, r.end)};
    first = false;
  }
  return span;
}

uint64_t ServedBytes(const adapter::LoraModule& m, Dtype dtype) {
  return (m.a.element_count() + m.b.element_count()) * DtypeBits(dtype) / 8;
}

Result<ServedFactors> FactorsFromSpan(const adapter::LoraModule& m, std::span<const uint8_t> span, Dtype dtype) {
  const adapter::ByteRange whole = ModuleSpan(m);
  if (span.size() != whole.size())
    return Invalid("module `" + m.path + "`: " + std::to_string(span.size()) + " bytes given for a span of " +
                   std::to_string(whole.size()));
  adapter::TensorFetch fetch;
  fetch.Request({&m.a, &m.b});
  // The ranges TensorFetch lists, in order, cut out of the one span.
  const std::vector<adapter::ByteRange> needs(fetch.needs().begin(), fetch.needs().end());
  for (const auto& r : needs) PB_RETURN_IF_ERROR(fetch.Supply(span.subspan(r.begin - whole.begin, r.size())));
  if (!fetch.ready()) return Invalid("module `" + m.path + "`: its factors did not arrive whole");
  ServedFactors out;
  out.dtype = dtype;
  for (int i = 0; i < 2; ++i) {
    const adapter::Tensor& t = *fetch.get(i);
    const uint64_t n = t.element_count();
    std::vector<uint8_t> bytes(n * DtypeBits(dtype) / 8);
    if (!kernels::CanConvert(t.dtype, dtype) ||
        !kernels::ConvertElements(t.dtype, dtype, t.bytes.data(), bytes.data(), n))
      return MakeError(ErrorCode::UnsupportedDtype, "module `" + m.path + "`: cannot convert its " +
                                                        std::string(DtypeName(t.dtype)) + " factors to " +
                                                        std::string(DtypeName(dtype)));
    (i == 0 ? out.a : out.b) = std::move(bytes);
    (i == 0 ? out.a_shape : out.b_shape) = t.shape;
  }
  return out;
}

namespace {

// A held tensor of the factors (for MatrixOf).
adapter::Tensor TensorOf(const std::vector<uint8_t>& bytes, Dtype dtype, const std::vector<uint64_t>& shape) {
  adapter::Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.bytes = bytes;
  return t;
}

Status CheckTerms(const std::vector<ServedTerm>& terms) {
  if (terms.empty()) return Invalid("nothing to compose: no adapter has the module");
  const ServedFactors& lead = *terms.front().factors;
  for (const ServedTerm& t : terms) {
    const ServedFactors& f = *t.factors;
    if (f.a_shape.size() < 2 || f.b_shape.size() < 2 || f.a_shape[0] != f.b_shape[1] || Product(f.b_shape, 2) != 1)
      return MakeError(ErrorCode::ShapeMismatch, "factors of shapes " + ShapeText(f.a_shape) + " and " +
                                                     ShapeText(f.b_shape) + " are not A [r, in] and B [out, r]");
    std::vector<uint64_t> in(f.a_shape.begin() + 1, f.a_shape.end()),
        lead_in(lead.a_shape.begin() + 1, lead.a_shape.end());
    if (in != lead_in || f.b_shape[0] != lead.b_shape[0])
      return MakeError(ErrorCode::ShapeMismatch, "the adapters' factors disagree: A " + ShapeText(lead.a_shape) +
                                                     " and " + ShapeText(f.a_shape) + ", B " + ShapeText(lead.b_shape) +
                                                     " and " + ShapeText(f.b_shape));
  }
  return Status::Ok();
}

}  // namespace

Result<ServedFactors> ComposeCat(const std::vector<ServedTerm>& terms, Dtype dtype, uint64_t padded_rank,
                                 const CompositionLimits& limits) {
  PB_RETURN_IF_ERROR(CheckCompositionTerms(terms.size(), limits));
  PB_RETURN_IF_ERROR(CheckTerms(terms));
  {
    // Bounded before anything is allocated: the result is rank × (in + out) values of `dtype`.
    uint64_t sum = 0;
    for (const ServedTerm& t : terms) sum += t.factors->a_shape[0];
    const uint64_t r = std::max(sum, padded_rank);
    const ServedFactors& lead = *terms.front().factors;
    // A padded rank comes from the caller (up to 2^53 from JS): the products saturate instead of wrapping past the
    // byte bound.
    uint64_t values = 0, bits = 0;
    if (__builtin_mul_overflow(r, Product(lead.a_shape, 1) + lead.b_shape[0], &values) ||
        __builtin_mul_overflow(values, uint64_t{DtypeBits(dtype)}, &bits))
      bits = UINT64_MAX;
    PB_RETURN_IF_ERROR(CheckComposition(terms.size(), r, bits / 8, "the composed module", limits));
  }
  std::vector<Term> math_terms;
  uint64_t rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const ServedFactors& f = *terms[i].factors;
    Term t;
    PB_ASSIGN_OR_RETURN(t.a, MatrixOf(TensorOf(f.a, f.dtype, f.a_shape)));
    PB_ASSIGN_OR_RETURN(t.b, MatrixOf(TensorOf(f.b, f.dtype, {f.b_shape[0], f.b_shape[1]})));
    t.weight = terms[i].weight;
    t.scaling = terms[i].scaling;
    t.dtype = f.dtype;
    t.adapter = i;
    rank += f.a_shape[0];
    math_terms.push_back(std::move(t));
  }
  if (padded_rank != 0 && padded_rank < rank)
    return MakeError(ErrorCode::InvalidArgument,
                     "rank " + std::to_string(padded_rank) + " is less than the terms' " + std::to_string(rank));
  if (padded_rank != 0) rank = padded_rank;
  ModuleMath math;
  math.method = CombineMethod::kCat;
  math.rank = rank;
  PB_ASSIGN_OR_RETURN(auto combined, CombineModule(math_terms, math));
  ServedFactors out;
  out.dtype = dtype;
  out.a = BytesOf(combined.a, dtype);
  out.b = BytesOf(combined.b, dtype);
  out.a_shape = terms.front().factors->a_shape;
  out.a_shape[0] = rank;
  out.b_shape = terms.front().factors->b_shape;
  out.b_shape[1] = rank;
  return out;
}

Status CheckCompositionTerms(uint64_t terms, const CompositionLimits& limits) {
  if (terms == 0) return Invalid("a composition needs at least one adapter");
  if (terms > limits.max_terms)
    return Invalid("a composition of " + std::to_string(terms) + " adapters: at most " +
                   std::to_string(limits.max_terms) + " may be composed at once (maxTerms)");
  return Status::Ok();
}

Status CheckComposition(uint64_t terms, uint64_t rank, uint64_t bytes, std::string_view what,
                        const CompositionLimits& limits) {
  PB_RETURN_IF_ERROR(CheckCompositionTerms(terms, limits));
  if (rank > limits.max_rank)
    return MakeError(ErrorCode::LimitExceeded, std::string(what) + " would have rank " + std::to_string(rank) +
                                                   ", more than the limit of " + std::to_string(limits.max_rank) +
                                                   " (maxRank)");
  if (bytes > limits.max_bytes)
    return MakeError(ErrorCode::LimitExceeded, std::string(what) + " would be " + std::to_string(bytes) +
                                                   " bytes, more than the limit of " +
                                                   std::to_string(limits.max_bytes) + " bytes (maxComposeBytes)");
  return Status::Ok();
}

WeightLayout AutoLayout(const ServedFactors& factors, bool embedding, const std::vector<uint64_t>& shape) {
  if (embedding) return WeightLayout::kEmbedding;
  if (!shape.empty() && !factors.b_shape.empty() && shape[0] == factors.b_shape[0] &&
      Product(shape, 1) == Product(factors.a_shape, 1))
    return WeightLayout::kOutIn;
  return WeightLayout::kInOut;
}

Result<std::vector<uint8_t>> ApplyTerms(const std::vector<ServedTerm>& terms, std::span<const uint8_t> weight,
                                        Dtype weight_dtype, const std::vector<uint64_t>& weight_shape, Dtype out_dtype,
                                        WeightLayout layout) {
  PB_RETURN_IF_ERROR(CheckTerms(terms));
  const ServedFactors& lead = *terms.front().factors;
  const uint64_t out_features = lead.b_shape[0], in_features = Product(lead.a_shape, 1);
  const uint64_t rows = layout == WeightLayout::kOutIn ? out_features : in_features;
  const uint64_t cols = layout == WeightLayout::kOutIn ? in_features : out_features;
  if (weight_shape.empty() || weight_shape[0] != rows || Product(weight_shape, 1) != cols)
    return MakeError(ErrorCode::ShapeMismatch, "a weight of shape " + ShapeText(weight_shape) +
                                                   " cannot take a delta of [" + std::to_string(rows) + ", " +
                                                   std::to_string(cols) + "] (" +
                                                   (layout == WeightLayout::kOutIn ? "out, in" : "in, out") + ")");
  if (!IsConvertibleFloat(weight_dtype) || !IsConvertibleFloat(out_dtype))
    return MakeError(ErrorCode::UnsupportedDtype,
                     "cannot merge into a " + std::string(DtypeName(weight_dtype)) + " weight");
  if (weight.size() != rows * cols * DtypeBits(weight_dtype) / 8)
    return Invalid("the weight has " + std::to_string(weight.size()) + " bytes; " + ShapeText(weight_shape) + " " +
                   std::string(DtypeName(weight_dtype)) + " takes " +
                   std::to_string(rows * cols * DtypeBits(weight_dtype) / 8));

  // fp32 factors B [out, R] and A [R, in]: one term as merge holds it (scale fp32(c)), several with cᵢ folded into Aᵢ.
  uint64_t rank = 0;
  for (const ServedTerm& t : terms) rank += t.factors->a_shape[0];
  std::vector<float> b(out_features * rank), a(rank * in_features);
  float scale = 1.0f;
  uint64_t at = 0;
  for (const ServedTerm& t : terms) {
    const ServedFactors& f = *t.factors;
    const uint64_t r = f.a_shape[0];
    PB_ASSIGN_OR_RETURN(auto fa, F32Of(f.a, f.dtype, r * in_features));
    PB_ASSIGN_OR_RETURN(auto fb, F32Of(f.b, f.dtype, out_features * r));
    const double c = t.weight * t.scaling;
    if (terms.size() == 1) {
      scale = static_cast<float>(c);
      std::copy(fa.begin(), fa.end(), a.begin());
    } else {
      for (uint64_t k = 0; k < r * in_features; ++k) a[at * in_features + k] = static_cast<float>(c * fa[k]);
    }
    for (uint64_t i = 0; i < out_features; ++i)
      for (uint64_t k = 0; k < r; ++k) b[i * rank + at + k] = fb[i * r + k];
    at += r;
  }
  std::vector<float> left, right;
  if (layout == WeightLayout::kOutIn) {
    left = std::move(b);   // B [out, R]
    right = std::move(a);  // A [R, in]
  } else {
    left = kernels::Transposed(a, rank, in_features);    // Aᵀ [in, R]
    right = kernels::Transposed(b, out_features, rank);  // Bᵀ [R, out]
  }
  kernels::LowRankFactors factors{left.data(), right.data(), static_cast<size_t>(rank), scale, 1.0f};
  std::vector<uint8_t> out(rows * cols * DtypeBits(out_dtype) / 8);
  const bool ok =
      layout == WeightLayout::kEmbedding
          ? kernels::MergeRowsRoundDeltaFirst(weight_dtype, weight.data(), out_dtype, out.data(), rows, cols, factors)
          : kernels::MergeRows(weight_dtype, weight.data(), out_dtype, out.data(), rows, cols, factors);
  if (!ok) return MakeError(ErrorCode::OutOfMemory, "the merge kernel could not allocate its staging buffer");
  return out;
}

}  // namespace pb::compose
