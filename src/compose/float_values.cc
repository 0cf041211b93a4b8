#include "compose/float_values.h"

#include <cmath>

#include "kernels/convert_scalar.h"

namespace pb::compose {
namespace ks = pb::kernels::scalar;

double RoundTo(Dtype dtype, double x) {
  switch (dtype) {
    case Dtype::F64: return x;
    case Dtype::F32: return static_cast<double>(ks::BitsFloat(ks::F64BitsToF32Bits(ks::DoubleBits(x))));
    case Dtype::BF16: {
      uint16_t h = ks::F32BitsToBF16(ks::F64BitsToF32Bits(ks::DoubleBits(x)));
      return static_cast<double>(ks::BitsFloat(ks::BF16ToF32Bits(h)));
    }
    case Dtype::F16: {
      uint16_t h = ks::F32BitsToF16(ks::F64BitsToF32Bits(ks::DoubleBits(x)));
      return static_cast<double>(ks::BitsFloat(ks::F16ToF32Bits(h)));
    }
    default: return x;
  }
}

Result<linalg::Matrix> MatrixOf(const adapter::Tensor& t) {
  if (t.dtype != Dtype::F32 && t.dtype != Dtype::F64 && t.dtype != Dtype::BF16 && t.dtype != Dtype::F16)
    return MakeError(ErrorCode::UnsupportedDtype, "a LoRA factor of dtype " + std::string(DtypeName(t.dtype)) +
                                                      " cannot be combined (F64, F32, BF16 or F16 only)");
  const uint64_t rows = t.shape.empty() ? 1 : t.shape[0];
  const uint64_t count = t.element_count();
  linalg::Matrix m(rows, rows == 0 ? 0 : count / rows);
  const uint8_t* p = t.bytes.data();
  for (uint64_t i = 0; i < count; ++i) {
    double v = 0;
    switch (t.dtype) {
      case Dtype::F64: v = ks::BitsDouble(ks::LoadAt<uint64_t>(p, i)); break;
      case Dtype::F32: v = ks::BitsFloat(ks::LoadAt<uint32_t>(p, i)); break;
      case Dtype::BF16: v = ks::BitsFloat(ks::BF16ToF32Bits(ks::LoadAt<uint16_t>(p, i))); break;
      default: v = ks::BitsFloat(ks::F16ToF32Bits(ks::LoadAt<uint16_t>(p, i))); break;
    }
    m.data()[i] = v;
  }
  return m;
}

std::vector<uint8_t> BytesOf(const linalg::Matrix& m, Dtype dtype) {
  const size_t n = m.data().size();
  std::vector<uint8_t> out(n * DtypeBits(dtype) / 8);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = ks::DoubleBits(m.data()[i]);
    switch (dtype) {
      case Dtype::F64: ks::StoreAt<uint64_t>(out.data(), i, bits); break;
      case Dtype::F32: ks::StoreAt<uint32_t>(out.data(), i, ks::F64BitsToF32Bits(bits)); break;
      case Dtype::BF16: ks::StoreAt<uint16_t>(out.data(), i, ks::F32BitsToBF16(ks::F64BitsToF32Bits(bits))); break;
      default: ks::StoreAt<uint16_t>(out.data(), i, ks::F32BitsToF16(ks::F64BitsToF32Bits(bits))); break;
    }
  }
  return out;
}

void RoundAll(linalg::Matrix& m, Dtype dtype) {
  for (double& v : m.data()) v = RoundTo(dtype, v);
}

Status RequireFinite(const linalg::Matrix& m, Dtype dtype, const std::string& what) {
  for (double v : m.data())
    if (!std::isfinite(v))
      return MakeError(ErrorCode::InvalidArgument,
                       what + ": the result has " + (std::isnan(v) ? "NaN" : "infinite") + " values in " +
                           std::string(DtypeName(dtype)) +
                           " (a weight too large for it, or an input that holds such values); nothing was written");
  return Status::Ok();
}

}  // namespace pb::compose
