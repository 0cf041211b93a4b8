#include "compose/extract_job.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "adapter/lora_config.h"
#include "text/python_json.h"
#include "compose/float_values.h"
#include "compose/model_modules.h"
#include "core/json.h"
#include "kernels/convert_scalar.h"
#include "linalg/truncated_svd.h"

namespace pb::compose {
namespace {
namespace ks = pb::kernels::scalar;

constexpr uint64_t kPieceBytes = uint64_t(1) << 20;  // a saved tensor is compared this much at a time

enum class Purpose { kBaseWeight, kTunedWeight, kBaseBias, kTunedBias, kCompareBase, kCompareTuned, kEmit };

struct Step {
  Purpose purpose;
  const ModelTensor* tensor;
  size_t saved = 0;               // kSave: which tensor of the module
  uint64_t first = 0, count = 0;  // the elements of the tensor this step reads
  ExtractRead Range() const {
    const uint64_t size = DtypeBits(tensor->dtype) / 8;
    bool tuned = purpose == Purpose::kTunedWeight || purpose == Purpose::kTunedBias ||
                 purpose == Purpose::kCompareTuned || purpose == Purpose::kEmit;
    return {tuned, tensor->shard, tensor->begin + first * size, tensor->begin + (first + count) * size};
  }
};

double ValueAt(Dtype dtype, const uint8_t* p) {
  switch (dtype) {
    case Dtype::F64: return ks::BitsDouble(ks::LoadAt<uint64_t>(p, 0));
    case Dtype::F32: return ks::BitsFloat(ks::LoadAt<uint32_t>(p, 0));
    case Dtype::BF16: return ks::BitsFloat(ks::BF16ToF32Bits(ks::LoadAt<uint16_t>(p, 0)));
    case Dtype::F16: return ks::BitsFloat(ks::F16ToF32Bits(ks::LoadAt<uint16_t>(p, 0)));
    case Dtype::F8_E4M3: return ks::BitsFloat(ks::F8E4M3ToF32Bits(p[0]));
    case Dtype::F8_E5M2: return ks::BitsFloat(ks::F8E5M2ToF32Bits(p[0]));
    default: return 0;
  }
}

void AppendValue(std::vector<uint8_t>& out, Dtype dtype, double x) {
  const double r = RoundTo(dtype, x);
  switch (dtype) {
    case Dtype::F32: {
      uint32_t b = ks::FloatBits(static_cast<float>(r));
      for (int i = 0; i < 4; ++i) out.push_back(uint8_t(b >> (8 * i)));
      break;
    }
    case Dtype::BF16: {
      uint16_t b = ks::F32BitsToBF16(ks::FloatBits(static_cast<float>(r)));
      out.push_back(uint8_t(b));
      out.push_back(uint8_t(b >> 8));
      break;
    }
    default: {  // F16
      uint16_t b = ks::F32BitsToF16(ks::FloatBits(static_cast<float>(r)));
      out.push_back(uint8_t(b));
      out.push_back(uint8_t(b >> 8));
      break;
    }
  }
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

struct ExtractJob::Impl {
  const ExtractPlan& plan;
  ByteSink& sink;
  size_t module = 0;
  std::vector<Step> steps;
  size_t step = 0;
  uint64_t element = 0;  // elements of the current step done
  std::vector<uint8_t> carry;
  uint64_t bytes_read = 0;
  std::optional<Error> failed;

  std::vector<float> delta;
  std::vector<double> base_bias, bias_delta, piece;
  bool changed = false;
  bool emitting = false;
  std::vector<uint8_t> out;

  std::vector<TensorSpec> written;
  uint64_t data_size = 0;
  std::vector<ExtractModuleReport> reports;

  Impl(const ExtractPlan& p, ByteSink& s) : plan(p), sink(s) { Begin(); }

  const ExtractModule& current() const { return plan.modules[module]; }

  // The steps of the module `module` (from its first phase).
  void Begin() {
    steps.clear();
    step = 0;
    element = 0;
    changed = false;
    emitting = false;
    if (module >= plan.modules.size()) return;
    const ExtractModule& m = current();
    if (m.kind == ExtractKind::kSave) {
      for (size_t i = 0; i < m.saved_names.size(); ++i) {
        const ModelTensor& b = m.base_saved[i];
        const ModelTensor& t = m.tuned_saved[i];
        const uint64_t size = std::max(DtypeBits(b.dtype), DtypeBits(t.dtype)) / 8;
        const uint64_t per_piece = std::max<uint64_t>(1, kPieceBytes / std::max<uint64_t>(size, 1));
        const uint64_t n = b.elements();
        for (uint64_t first = 0; first < n; first += per_piece) {
          const uint64_t count = std::min(per_piece, n - first);
          steps.push_back({Purpose::kCompareBase, &b, i, first, count});
          steps.push_back({Purpose::kCompareTuned, &t, i, first, count});
        }
      }
      return;
    }
    delta.assign(m.rows * m.cols, 0.0f);
    steps.push_back({Purpose::kBaseWeight, &*m.base_weight, 0, 0, m.base_weight->elements()});
    steps.push_back({Purpose::kTunedWeight, &*m.tuned_weight, 0, 0, m.tuned_weight->elements()});
    if (m.base_bias) {
      base_bias.assign(m.base_bias->elements(), 0);
      bias_delta.assign(m.base_bias->elements(), 0);
      steps.push_back({Purpose::kBaseBias, &*m.base_bias, 0, 0, m.base_bias->elements()});
      steps.push_back({Purpose::kTunedBias, &*m.tuned_bias, 0, 0, m.tuned_bias->elements()});
    }
  }

  Status Write(const std::string& name, const std::vector<uint64_t>& shape, std::vector<uint8_t>& bytes) {
    written.push_back({current().key() + "." + name, plan.dtype, shape});
    data_size += bytes.size();
    Status s = sink.Write(bytes);
    bytes.clear();
    return s;
  }

  Status Element(const Step& s, uint64_t index, double v) {
    switch (s.purpose) {
      case Purpose::kBaseWeight: delta[index] = -static_cast<float>(v); break;
      case Purpose::kTunedWeight: delta[index] = static_cast<float>(v) + delta[index]; break;
      case Purpose::kBaseBias: base_bias[index] = v; break;
      case Purpose::kTunedBias: bias_delta[index] = v - base_bias[index]; break;
      case Purpose::kCompareBase: piece[index - s.first] = v; break;
      case Purpose::kCompareTuned: {
        double b = piece[index - s.first];
        if (v != b && !(std::isnan(v) && std::isnan(b))) changed = true;
        break;
      }
      case Purpose::kEmit: AppendValue(out, plan.dtype, v); break;
    }
    return Status::Ok();
  }

  Status Push(std::span<const uint8_t> bytes) {
    if (failed) return *failed;
    Status s = PushBytes(bytes);
    if (!s.ok()) failed = s.error();
    return s;
  }

  Status PushBytes(std::span<const uint8_t> bytes) {
    while (!bytes.empty()) {
      if (step >= steps.size())
        return MakeError(ErrorCode::InvalidArgument, "extract: bytes pushed after the last range it asked for");
      const Step& s = steps[step];
      const size_t size = DtypeBits(s.tensor->dtype) / 8;
      if (element == 0 && carry.empty() && s.purpose == Purpose::kCompareBase) piece.assign(s.count, 0);
      const uint64_t remaining = (s.count - element) * size - carry.size();
      const size_t take = size_t(std::min<uint64_t>(remaining, bytes.size()));
      std::span<const uint8_t> chunk = bytes.first(take);
      bytes = bytes.subspan(take);
      bytes_read += take;
      if (!carry.empty()) {
        size_t need = std::min(size - carry.size(), chunk.size());
        carry.insert(carry.end(), chunk.begin(), chunk.begin() + need);
        chunk = chunk.subspan(need);
        if (carry.size() == size) {
          PB_RETURN_IF_ERROR(Element(s, s.first + element, ValueAt(s.tensor->dtype, carry.data())));
          ++element;
          carry.clear();
        }
      }
      while (chunk.size() >= size) {
        PB_RETURN_IF_ERROR(Element(s, s.first + element, ValueAt(s.tensor->dtype, chunk.data())));
        ++element;
        chunk = chunk.subspan(size);
      }
      if (!chunk.empty()) carry.assign(chunk.begin(), chunk.end());  // a partial element (carry was empty or completed)
      if (s.purpose == Purpose::kEmit && !out.empty()) {             // stream a saved tensor out as it comes
        data_size += out.size();
        PB_RETURN_IF_ERROR(sink.Write(out));
        out.clear();
      }
      if (element == s.count && carry.empty()) {
        ++step;
        element = 0;
        if (step == steps.size()) PB_RETURN_IF_ERROR(ModuleInputsDone());
      }
    }
    return Status::Ok();
  }

  Status ModuleInputsDone() {
    const ExtractModule& m = current();
    ExtractModuleReport report;
    report.path = m.path;
    report.kind = m.kind;
    if (m.kind == ExtractKind::kSave) {
      if (!emitting && changed) {
        // Second phase: the tuned tensors again, written as they come.
        emitting = true;
        steps.clear();
        step = 0;
        for (size_t i = 0; i < m.saved_names.size(); ++i) {
          written.push_back({m.key() + "." + m.saved_names[i], plan.dtype, m.tuned_saved[i].shape});
          steps.push_back({Purpose::kEmit, &m.tuned_saved[i], i, 0, m.tuned_saved[i].elements()});
        }
        return Status::Ok();
      }
      report.changed = emitting;
      reports.push_back(std::move(report));
      piece = {};
      return NextModule();
    }
    PB_RETURN_IF_ERROR(Decompose(m, report));
    reports.push_back(std::move(report));
    std::vector<float>().swap(delta);
    std::vector<double>().swap(base_bias);
    std::vector<double>().swap(bias_delta);
    return NextModule();
  }

  Status NextModule() {
    ++module;
    Begin();
    return Status::Ok();
  }

  Status Decompose(const ExtractModule& m, ExtractModuleReport& report) {
    bool any = false;
    for (float d : delta) {
      if (!std::isfinite(d))
        return MakeError(ErrorCode::InvalidArgument, "extract: `" + m.path +
                                                         ".weight` differs by a value that is not "
                                                         "finite (inf or NaN in either model, or an overflow)");
      any |= d != 0;
    }
    bool bias_changed = false;
    for (double d : bias_delta) {
      if (!std::isfinite(d))
        return MakeError(ErrorCode::InvalidArgument,
                         "extract: `" + m.path + ".bias` differs by a value that is not finite");
      bias_changed |= d != 0;
    }
    if (!any && !bias_changed) return Status::Ok();  // unchanged: dropped
    report.changed = true;

    linalg::TruncatedSvdOptions o;
    o.rank = size_t(m.max_rank);
    o.seed = Fnv1a(m.path);
    // A subspace twice the rank (Halko et al.'s advice for slowly decaying spectra) and more iterations than the
    // defaults: a fine-tune's delta has a flat head and a noise tail, where a rank-16 or rank-128 cut converges
    // slowly (measured: docs/extract.md, "The SVD").
    o.oversampling = std::max<size_t>(16, o.rank);
    o.max_iterations = 24;
    // Where the subspace would span half of the smaller side anyway, take all of it: one pass each way gives the
    // exact truncated SVD (a randomized subspace that large gains nothing, and on flat spectra it can miss the
    // optimum by more than the documented 1e-4).
    const uint64_t side = std::min(m.rows, m.cols);
    if (2 * (o.rank + o.oversampling) >= side) o.oversampling = size_t(side - o.rank);
    linalg::TruncatedSvd svd = linalg::RandomizedTruncatedSvd(delta.data(), m.rows, m.cols, m.cols, o);
    report.iterations = svd.iterations;
    uint64_t k = m.max_rank;
    const double total = svd.frobenius_squared;
    if (plan.options.energy && total > 0) {
      double kept = 0;
      k = 0;
      while (k < svd.s.size()) {
        kept += svd.s[k] * svd.s[k];
        ++k;
        if (kept >= *plan.options.energy * total) break;
      }
    }
    k = std::max<uint64_t>(1, std::min<uint64_t>(k, svd.s.size()));
    double kept = 0;
    for (uint64_t i = 0; i < k; ++i) kept += svd.s[i] * svd.s[i];
    report.rank = k;
    report.energy_kept = total > 0 ? std::min(1.0, kept / total) : 1;
    report.relative_error = total > 0 ? std::sqrt(std::max(0.0, total - kept) / total) : 0;

    // ΔW_stored = U·S·Vᵀ. Not transposed: B = U·√S [rows, k], A = √S·Vᵀ [k, cols]. Transposed (PEFT's delta is
    // ΔW_storedᵀ = V·S·Uᵀ): B = V·√S [cols, k], A = √S·Uᵀ [k, rows].
    const linalg::Matrix& left = m.transposed ? svd.v : svd.u;   // B's columns
    const linalg::Matrix& right = m.transposed ? svd.u : svd.v;  // A's rows
    std::vector<double> root(k);
    for (uint64_t i = 0; i < k; ++i) root[i] = std::sqrt(svd.s[i]);
    const uint64_t out_features = left.rows(), in_features = right.rows();
    out.clear();
    out.reserve(size_t(k * in_features * DtypeBits(plan.dtype) / 8));
    for (uint64_t i = 0; i < k; ++i)
      for (uint64_t j = 0; j < in_features; ++j) AppendValue(out, plan.dtype, root[i] * right(j, i));
    std::vector<uint64_t> a_shape{k, m.kernel.empty() ? in_features : m.base_weight->shape[1]};
    a_shape.insert(a_shape.end(), m.kernel.begin(), m.kernel.end());
    std::vector<uint64_t> b_shape{out_features, k};
    for (size_t i = 0; i < m.kernel.size(); ++i) b_shape.push_back(1);
    const bool embedding = m.kind == ExtractKind::kEmbeddingLora;
    PB_RETURN_IF_ERROR(Write(embedding ? "lora_embedding_A" : "lora_A.weight", a_shape, out));
    if (bias_changed) {
      for (double d : bias_delta) AppendValue(out, plan.dtype, d);
      PB_RETURN_IF_ERROR(Write("lora_B.bias", {uint64_t(bias_delta.size())}, out));
      report.bias = true;
    }
    out.reserve(size_t(out_features * k * DtypeBits(plan.dtype) / 8));
    for (uint64_t i = 0; i < out_features; ++i)
      for (uint64_t j = 0; j < k; ++j) AppendValue(out, plan.dtype, left(i, j) * root[j]);
    PB_RETURN_IF_ERROR(Write(embedding ? "lora_embedding_B" : "lora_B.weight", b_shape, out));
    std::vector<uint8_t>().swap(out);
    return Status::Ok();
  }

  std::optional<ExtractRead> NextRead() const {
    if (failed || step >= steps.size()) return std::nullopt;
    ExtractRead r = steps[step].Range();
    const uint64_t size = DtypeBits(steps[step].tensor->dtype) / 8;
    r.begin += element * size + carry.size();
    return r;
  }
};

ExtractJob::ExtractJob(const ExtractPlan& plan, ByteSink& data) : impl_(std::make_unique<Impl>(plan, data)) {}
ExtractJob::~ExtractJob() = default;
std::optional<ExtractRead> ExtractJob::NextRead() const { return impl_->NextRead(); }
Status ExtractJob::Push(std::span<const uint8_t> bytes) { return impl_->Push(bytes); }
uint64_t ExtractJob::bytes_read() const { return impl_->bytes_read; }
size_t ExtractJob::modules_done() const { return impl_->module; }

Result<ExtractOutcome> ExtractJob::Finish() {
  Impl& s = *impl_;
  if (s.failed) return *s.failed;
  if (s.module < s.plan.modules.size())
    return MakeError(ErrorCode::InvalidArgument, "extract: finished before every range it asked for was pushed");
  const ExtractPlan& plan = s.plan;
  ExtractOutcome o;
  o.modules = s.reports;
  o.data_size = s.data_size;
  std::set<std::string> targets;
  std::vector<std::string> saved;
  Json rank_pattern = Json::object(), alpha_pattern = Json::object();
  bool conv1d = false;
  for (size_t i = 0; i < o.modules.size(); ++i) {
    const auto& r = o.modules[i];
    if (!r.changed) {
      ++o.unchanged;
      continue;
    }
    if (r.kind == ExtractKind::kSave) {
      ++o.saved;
      const std::string& entry = plan.modules[i].save_as;
      if (std::find(saved.begin(), saved.end(), entry) == saved.end()) saved.push_back(entry);
      continue;
    }
    ++o.decomposed;
    o.biases += r.bias;
    targets.insert(r.path);
    o.max_rank = std::max(o.max_rank, r.rank);
    conv1d |= plan.modules[i].layer == adapter::ModuleKind::kConv1D;
  }
  if (o.decomposed == 0)
    return MakeError(ErrorCode::InvalidArgument,
                     "extract: no decomposed module differs between the models (" + std::to_string(o.unchanged) +
                         " module(s) compared are identical" +
                         (o.saved ? ", " + std::to_string(o.saved) + " saved module(s) changed" : std::string()) +
                         "): there is no LoRA to write");
  for (const auto& r : o.modules)
    if (r.changed && r.kind != ExtractKind::kSave && r.rank != o.max_rank) {
      rank_pattern[r.path] = int64_t(r.rank);
      alpha_pattern[r.path] = int64_t(r.rank);
    }

  auto header = PlanWrite(s.written, Metadata{{"format", "pt"}}, TensorOrder::kInput);
  if (!header.ok()) return header.error();
  if (header->header.size() > plan.reserved_header || header->data_size != s.data_size)
    return MakeError(ErrorCode::InvalidArgument, "extract: the header outgrew its reserved region (a bug)");
  o.header = header->header;
  o.header.resize(size_t(plan.reserved_header), ' ');
  const uint64_t n = plan.reserved_header - 8;
  for (int i = 0; i < 8; ++i) o.header[i] = char(uint8_t(n >> (8 * i)));

  // Every module's scaling is lora_alpha / r = 1, as mergekit writes it: the singular values are in A and B.
  Json doc = adapter::DefaultLoraConfigDocument();
  doc["r"] = int64_t(o.max_rank);
  doc["lora_alpha"] = int64_t(o.max_rank);
  doc["rank_pattern"] = rank_pattern;
  doc["alpha_pattern"] = alpha_pattern;
  doc["target_modules"] = plan.model_modules->SavedTargetModules(targets);
  if (!saved.empty()) doc["modules_to_save"] = saved;
  if (o.biases) doc["lora_bias"] = true;
  if (conv1d) doc["fan_in_fan_out"] = true;
  if (plan.task_type) doc["task_type"] = *plan.task_type;
  if (plan.options.base_name_or_path) doc["base_model_name_or_path"] = *plan.options.base_name_or_path;
  if (plan.options.revision) doc["revision"] = *plan.options.revision;
  o.config_text = text::DumpPythonJson(doc);
  return o;
}

}  // namespace pb::compose
