#include "compose/create_writer.h"

#include <cmath>
#include <cstring>

#include "compose/create_random.h"
#include "kernels/convert_scalar.h"

namespace pb::compose {
namespace {

// One element of a floating-point weight as a double (exact for every dtype here).
std::optional<double> ElementValue(Dtype dtype, const uint8_t* p) {
  using namespace pb::kernels::scalar;
  switch (dtype) {
    case Dtype::F64: {
      uint64_t u;
      std::memcpy(&u, p, 8);
      return BitsDouble(u);
    }
    case Dtype::F32: {
      uint32_t u;
      std::memcpy(&u, p, 4);
      return double(BitsFloat(u));
    }
    case Dtype::BF16: {
      uint16_t u;
      std::memcpy(&u, p, 2);
      return double(BitsFloat(BF16ToF32Bits(u)));
    }
    case Dtype::F16: {
      uint16_t u;
      std::memcpy(&u, p, 2);
      return double(BitsFloat(F16ToF32Bits(u)));
    }
    case Dtype::F8_E4M3: return double(BitsFloat(F8E4M3ToF32Bits(*p)));
    case Dtype::F8_E5M2: return double(BitsFloat(F8E5M2ToF32Bits(*p)));
    default: return std::nullopt;
  }
}

// A float rounded to `dtype` (round to nearest even), back as a float: the value a tensor of that dtype holds.
float RoundTo(Dtype dtype, float v) {
  using namespace pb::kernels::scalar;
  switch (dtype) {
    case Dtype::BF16: return BitsFloat(BF16ToF32Bits(F32BitsToBF16(FloatBits(v))));
    case Dtype::F16: return BitsFloat(F16ToF32Bits(F32BitsToF16(FloatBits(v))));
    case Dtype::F8_E4M3: return BitsFloat(F8E4M3ToF32Bits(F32BitsToF8E4M3(FloatBits(v))));
    case Dtype::F8_E5M2: return BitsFloat(F8E5M2ToF32Bits(F32BitsToF8E5M2(FloatBits(v))));
    default: return v;  // F32, F64 (kept at float precision: the adapter holds floats)
  }
}

void Store(Dtype dtype, std::vector<uint8_t>& out, size_t i, float v) {
  using namespace pb::kernels::scalar;
  if (dtype == Dtype::F32) {
    uint32_t u = FloatBits(v);
    std::memcpy(out.data() + 4 * i, &u, 4);
  } else {
    uint16_t u = dtype == Dtype::BF16 ? F32BitsToBF16(FloatBits(v)) : F32BitsToF16(FloatBits(v));
    std::memcpy(out.data() + 2 * i, &u, 2);
  }
}

}  // namespace

MagnitudePass::MagnitudePass(const CreatePlan& plan) : plan_(plan), norms_(plan.modules.size()) {
  if (!plan.options.dora) return;
  for (size_t m = 0; m < plan.modules.size(); ++m) {
    const auto& mod = plan.modules[m];
    ranges_.push_back({m, mod.shard, mod.begin, mod.end});
    total_ += mod.end - mod.begin;
  }
  // Empty weights cannot occur (the planner refuses a zero dimension); each range has bytes.
  if (!ranges_.empty()) sums_.assign(plan.modules[ranges_[0].module].out_features, 0.0);
}

// The squared sums of `count` whole elements at `p`, element `first` of the weight onwards: the row of element i
// is i / in (nn.Linear [out, in]) or i % out (Conv1D [in, out], whose transpose's rows are the columns), tracked
// by a counter rather than divided per element.
template <typename Load>
void AccumulateSquares(const uint8_t* p, size_t count, size_t width, uint64_t first, const CreateModule& mod,
                       std::vector<double>& sums, Load load) {
  const bool conv1d = mod.kind == adapter::ModuleKind::kConv1D;
  const uint64_t span = conv1d ? mod.out_features : mod.in_features;  // elements before the counter wraps
  uint64_t row = conv1d ? first % span : first / span, col = first % span;
  for (size_t i = 0; i < count; ++i, p += width) {
    const double v = load(p);
    sums[size_t(conv1d ? col : row)] += v * v;
    if (++col == span) {
      col = 0;
      ++row;
    }
  }
}

Status MagnitudePass::Elements(const uint8_t* p, size_t count) {
  const auto& mod = plan_.modules[ranges_[next_].module];
  const size_t width = DtypeBits(mod.weight_dtype) / 8;
  const uint64_t first = filled_ / width;
  using namespace pb::kernels::scalar;
  switch (mod.weight_dtype) {
    case Dtype::F32:
      AccumulateSquares(p, count, width, first, mod, sums_, [](const uint8_t* q) {
        uint32_t u;
        std::memcpy(&u, q, 4);
        return double(BitsFloat(u));
      });
      break;
    case Dtype::BF16:
      AccumulateSquares(p, count, width, first, mod, sums_, [](const uint8_t* q) {
        uint16_t u;
        std::memcpy(&u, q, 2);
        return double(BitsFloat(BF16ToF32Bits(u)));
      });
      break;
    case Dtype::F16:
      AccumulateSquares(p, count, width, first, mod, sums_, [](const uint8_t* q) {
        uint16_t u;
        std::memcpy(&u, q, 2);
        return double(BitsFloat(F16ToF32Bits(u)));
      });
      break;
    default: {
      if (!ElementValue(mod.weight_dtype, p))
        return MakeError(ErrorCode::UnsupportedAdapter, "`" + mod.weight + "` is not floating point");
      AccumulateSquares(p, count, width, first, mod, sums_,
                        [dtype = mod.weight_dtype](const uint8_t* q) { return *ElementValue(dtype, q); });
    }
  }
  filled_ += uint64_t(count) * width;
  return Status::Ok();
}

Status MagnitudePass::Push(std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    if (next_ == ranges_.size())
      return MakeError(ErrorCode::InvalidArgument, "internal: more base bytes than DoRA needs");
    const auto& range = ranges_[next_];
    const auto& mod = plan_.modules[range.module];
    const size_t width = DtypeBits(mod.weight_dtype) / 8;
    const uint64_t left = (range.end - range.begin) - filled_ - carry_.size();
    size_t take = size_t(std::min<uint64_t>(left, bytes.size()));
    size_t pos = 0;
    // An element split across chunks is completed first.
    if (!carry_.empty()) {
      size_t need = std::min(width - carry_.size(), take);
      carry_.insert(carry_.end(), bytes.begin(), bytes.begin() + need);
      pos = need;
      if (carry_.size() == width) {
        PB_RETURN_IF_ERROR(Elements(carry_.data(), 1));
        carry_.clear();
      }
    }
    const size_t whole = (take - pos) / width;
    if (whole) PB_RETURN_IF_ERROR(Elements(bytes.data() + pos, whole));
    pos += whole * width;
    if (pos < take) carry_.assign(bytes.begin() + pos, bytes.begin() + take);
    bytes = bytes.subspan(take);
    if (filled_ == range.end - range.begin) {
      // torch.linalg.norm(W, dim=1) in float, then .to(W.dtype).
      auto& out = norms_[range.module];
      out.resize(sums_.size());
      for (size_t i = 0; i < sums_.size(); ++i) out[i] = RoundTo(mod.weight_dtype, float(std::sqrt(sums_[i])));
      ++next_;
      filled_ = 0;
      if (next_ < ranges_.size()) sums_.assign(plan_.modules[ranges_[next_].module].out_features, 0.0);
    }
  }
  return Status::Ok();
}

std::vector<std::vector<float>> MagnitudePass::TakeNorms() { return std::move(norms_); }

std::vector<uint8_t> MakeTensorBytes(const CreatePlan& plan, size_t tensor,
                                     const std::vector<std::vector<float>>& norms) {
  const TensorSpec& spec = plan.specs[tensor];
  const CreateTensor& t = plan.tensors[tensor];
  const CreateModule& mod = plan.modules[t.module];
  const Dtype dtype = spec.dtype;
  uint64_t count = 1;
  for (uint64_t d : spec.shape) count *= d;
  std::vector<uint8_t> out(size_t(count) * (DtypeBits(dtype) / 8), 0);  // B: zeros (+0.0 in every dtype)
  if (t.role == CreateTensorRole::kA) {
    InitStream stream(plan.options.seed, mod.path);
    if (plan.options.init == CreateInit::kGaussian) {
      const double std_dev = 1.0 / double(plan.options.r);  // nn.init.normal_(std=1/r)
      for (uint64_t i = 0; i < count; ++i) Store(dtype, out, size_t(i), float(stream.NextGaussian() * std_dev));
    } else {
      // kaiming_uniform_(a=sqrt(5)) on the [r, in] weight: U(-bound, bound), fan_in = in.
      const double bound = KaimingUniformBound(mod.in_features);
      for (uint64_t i = 0; i < count; ++i)
        Store(dtype, out, size_t(i), float(bound * (2.0 * stream.NextUniform() - 1.0)));
    }
  } else if (t.role == CreateTensorRole::kMagnitude) {
    const auto& values = norms[t.module];
    for (uint64_t i = 0; i < count && i < values.size(); ++i) Store(dtype, out, size_t(i), values[size_t(i)]);
  }
  return out;
}

AdapterEmitter::AdapterEmitter(const CreatePlan& plan, std::vector<std::vector<float>> norms, ByteSink& sink)
    : plan_(plan), norms_(std::move(norms)), sink_(sink) {}
AdapterEmitter::~AdapterEmitter() = default;

Status AdapterEmitter::Begin() {
  if (plan_.options.dora && norms_.size() != plan_.modules.size())
    return MakeError(ErrorCode::InvalidArgument, "internal: DoRA magnitudes were not computed");
  writer_ = std::make_unique<StreamingWriter>(plan_.write, sink_);
  return writer_->Begin();
}

Result<bool> AdapterEmitter::Next() {
  if (!writer_) return MakeError(ErrorCode::InvalidArgument, "internal: Next before Begin");
  if (next_ == plan_.write.tensors.size()) return false;
  const size_t tensor = plan_.write.tensors[next_++].input_index;
  PB_RETURN_IF_ERROR(writer_->Write(MakeTensorBytes(plan_, tensor, norms_)));
  return true;
}

Status AdapterEmitter::Finish() {
  if (!writer_) return MakeError(ErrorCode::InvalidArgument, "internal: Finish before Begin");
  while (next_ < plan_.write.tensors.size()) {
    auto more = Next();
    if (!more.ok()) return more.error();
  }
  return writer_->Finish();
}

}  // namespace pb::compose
