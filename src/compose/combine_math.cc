#include "compose/combine_math.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "compose/dense_svd.h"
#include "compose/float_values.h"
#include "linalg/seeded_random.h"
#include "linalg/qr.h"
#include "linalg/svd.h"

namespace pb::compose {
namespace {

using linalg::Matrix;

// Where PEFT's torch code rounds (--peft-compat), `dtype`; in exact mode nothing rounds until the output.
struct Rounding {
  bool on = false;
  Dtype dtype = Dtype::F32;
  double operator()(double x) const { return on ? RoundTo(dtype, x) : x; }
};

Error Invalid(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }

// The exact combination as one pair of factors: A = [c₁·A₁; c₂·A₂; …] (Σrᵢ × in), B = [B₁ B₂ …] (out × Σrᵢ).
// PEFT's cat computes A·w·s in the factors' dtype, two roundings (`peft_rounding`); exact mode one product in double.
void CatForm(const std::vector<Term>& terms, bool peft_rounding, Matrix& a, Matrix& b) {
  size_t rows = 0;
  for (const Term& t : terms) rows += t.a.rows();
  a = Matrix(rows, terms.front().a.cols());
  b = Matrix(terms.front().b.rows(), rows);
  size_t at = 0;
  for (const Term& t : terms) {
    const Rounding round{peft_rounding, t.dtype};
    const double c = t.weight * t.scaling;
    // torch multiplies a float tensor by a Python float in float32 (its op math type): the scalar is rounded first.
    const double w32 = RoundTo(Dtype::F32, t.weight), s32 = RoundTo(Dtype::F32, t.scaling);
    for (size_t i = 0; i < t.a.rows(); ++i)
      for (size_t j = 0; j < t.a.cols(); ++j)
        a(at + i, j) = peft_rounding ? round(round(t.a(i, j) * w32) * s32) : t.a(i, j) * c;
    for (size_t i = 0; i < t.b.rows(); ++i)
      for (size_t j = 0; j < t.b.cols(); ++j) b(i, at + j) = t.b(i, j);
    at += t.a.rows();
  }
}

// `m`'s first rows × cols block copied into a zero matrix of rows × cols.
Matrix Padded(const Matrix& m, size_t rows, size_t cols) {
  Matrix out(rows, cols);
  for (size_t i = 0; i < std::min(rows, m.rows()); ++i)
    for (size_t j = 0; j < std::min(cols, m.cols()); ++j) out(i, j) = m(i, j);
  return out;
}

// PEFT's prune(): magnitude keeps the int(density·n) largest |x| (ties: the lower index first); random keeps
// each value with probability density and divides the kept ones by it. density ≥ 1 prunes nothing.
void Prune(std::vector<double>& t, double density, bool random, linalg::SeededRandom& stream, const Rounding& round) {
  if (density >= 1) return;
  if (random) {
    for (double& x : t) {
      const bool keep = stream.Uniform() < density;
      x = round(round(x * (keep ? 1.0 : 0.0)) / density);
    }
    return;
  }
  const size_t k = static_cast<size_t>(density * static_cast<double>(t.size()));
  std::vector<size_t> order(t.size());
  std::iota(order.begin(), order.end(), 0);
  // torch.topk ranks NaN above every number; the comparator must stay a strict weak order with NaN present.
  auto larger = [&](size_t x, size_t y) {
    const double ax = std::fabs(t[x]), ay = std::fabs(t[y]);
    const bool nx = std::isnan(ax), ny = std::isnan(ay);
    if (nx != ny) return nx;
    if (!nx && ax != ay) return ax > ay;
    return x < y;
  };
  if (k < order.size()) std::nth_element(order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(), larger);
  std::vector<bool> keep(t.size(), false);
  for (size_t i = 0; i < k && i < order.size(); ++i) keep[order[i]] = true;
  for (size_t i = 0; i < t.size(); ++i) t[i] = t[i] * (keep[i] ? 1.0 : 0.0);
}

// merge_utils.py's task_arithmetic / magnitude_prune / ties / dare_linear / dare_ties over equally shaped
// tensors `ts` (flattened) with weights `v`: prune, weight, then a sum or TIES's sign election and disjoint mean.
std::vector<double> MergeTaskTensors(std::vector<std::vector<double>> ts, const std::vector<double>& v,
                                     CombineMethod method, const ModuleMath& math, uint64_t factor,
                                     const Rounding& round) {
  const bool random = IsRandomMethod(method);
  const bool prunes = NeedsDensity(method);
  for (size_t i = 0; i < ts.size(); ++i) {
    linalg::SeededRandom stream(math.seed, {math.module_index, i, factor});
    if (prunes) Prune(ts[i], *math.density, random, stream, round);
  }
  const size_t n = ts.front().size();
  std::vector<double> out(n, 0.0);
  if (!UsesMajoritySign(method)) {
    for (size_t e = 0; e < n; ++e) {
      double s = 0.0;
      for (size_t i = 0; i < ts.size(); ++i) s = round(s + round(ts[i][e] * v[i]));
      out[e] = s;
    }
    return out;
  }
  auto sign = [](double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; };
  for (size_t e = 0; e < n; ++e) {
    double magnitude = 0.0;  // "total": the sum of the (unweighted) pruned values; "frequency": of their signs
    for (size_t i = 0; i < ts.size(); ++i)
      magnitude = math.majority_sign == MajoritySign::kTotal ? round(magnitude + ts[i][e]) : magnitude + sign(ts[i][e]);
    const int majority = magnitude >= 0 ? 1 : -1;
    double sum = 0.0, kept = 0.0;
    for (size_t i = 0; i < ts.size(); ++i) {
      const bool agrees = sign(ts[i][e]) == majority;
      sum = round(sum + round(round(ts[i][e] * v[i]) * (agrees ? 1.0 : 0.0)));
      kept += agrees ? 1 : 0;
    }
    out[e] = round(sum / std::max(kept, 1.0));
  }
  return out;
}

Matrix FromFlat(std::vector<double> flat, size_t rows, size_t cols) {
  Matrix m(rows, cols);
  m.data() = std::move(flat);
  return m;
}

// PEFT's A-and-B-separate path: cᵢ = wᵢ·sᵢ, A's weights sign(cᵢ)·√|cᵢ|, B's √|cᵢ| (as float32 tensors).
Combined Separately(const std::vector<Term>& terms, const ModuleMath& math) {
  // torch.tensor(weights) is float32; multiplied with the factors, torch computes in float32 (float64 factors
  // promote to float64).
  const Dtype work = terms.front().dtype == Dtype::F64 ? Dtype::F64 : Dtype::F32;
  const Rounding round{math.peft_compat, work};
  std::vector<double> va, vb;
  std::vector<std::vector<double>> as, bs;
  for (const Term& t : terms) {
    const double c = t.weight * t.scaling;
    const double root = std::sqrt(std::fabs(c));
    va.push_back(math.peft_compat ? RoundTo(Dtype::F32, c >= 0 ? root : -root) : (c >= 0 ? root : -root));
    vb.push_back(math.peft_compat ? RoundTo(Dtype::F32, root) : root);
    as.push_back(t.a.data());
    bs.push_back(t.b.data());
  }
  const Term& first = terms.front();
  Combined out;
  out.a = FromFlat(MergeTaskTensors(std::move(as), va, math.method, math, 0, round), first.a.rows(), first.a.cols());
  out.b = FromFlat(MergeTaskTensors(std::move(bs), vb, math.method, math, 1, round), first.b.rows(), first.b.cols());
  return out;
}

// B = U·S and A = Vᵀ of the leading `rank` triplets (zero-padded), PEFT's svd_clamp applied, and the energy kept.
Combined FromSvd(const linalg::Svd& svd, double total_energy, size_t out_rows, size_t in_cols, const ModuleMath& math) {
  const size_t k = std::min<size_t>(math.rank, svd.s.size());
  Combined c{Matrix(math.rank, in_cols), Matrix(out_rows, math.rank), std::nullopt};
  double kept = 0;
  for (size_t j = 0; j < k; ++j) {
    kept += svd.s[j] * svd.s[j];
    for (size_t i = 0; i < out_rows; ++i) c.b(i, j) = svd.u(i, j) * svd.s[j];
    for (size_t i = 0; i < in_cols; ++i) c.a(j, i) = svd.v(i, j);
  }
  c.kept_energy = total_energy > 0 ? kept / total_energy : 1.0;
  if (math.svd_clamp) {
    // torch.quantile (linear interpolation) over U·S and Vh flattened, then both clamped to ±that value.
    std::vector<double> all(c.b.data());
    all.insert(all.end(), c.a.data().begin(), c.a.data().end());
    std::sort(all.begin(), all.end(),
              [](double x, double y) { return std::isnan(y) ? !std::isnan(x) : x < y; });  // NaN last
    const double pos = *math.svd_clamp * static_cast<double>(all.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, all.size() - 1);
    const double bound = all[lo] + (pos - static_cast<double>(lo)) * (all[hi] - all[lo]);
    auto clamp = [&](double x) { return std::min(std::max(x, -bound), bound); };
    for (double& x : c.a.data()) x = clamp(x);
    for (double& x : c.b.data()) x = clamp(x);
  }
  return c;
}

// The SVD methods that prune full deltas: Δᵢ = sᵢ·Bᵢ·Aᵢ formed, merged elementwise with the weights wᵢ, then
// truncated.
Result<Combined> DenseSvd(const std::vector<Term>& terms, const ModuleMath& math) {
  const size_t out_rows = terms.front().b.rows(), in_cols = terms.front().a.cols();
  std::vector<std::vector<double>> deltas;
  std::vector<double> v;
  for (const Term& t : terms) {
    Matrix d = linalg::Multiply(t.b, t.a);
    for (double& x : d.data()) x *= t.scaling;
    deltas.push_back(std::move(d.data()));
    v.push_back(math.peft_compat ? RoundTo(Dtype::F32, t.weight) : t.weight);
  }
  CombineMethod inner = math.method == CombineMethod::kTiesSvd         ? CombineMethod::kTies
                        : math.method == CombineMethod::kDareLinearSvd ? CombineMethod::kDareLinear
                        : math.method == CombineMethod::kDareTiesSvd   ? CombineMethod::kDareTies
                                                                       : CombineMethod::kMagnitudePrune;
  Matrix merged = FromFlat(MergeTaskTensors(std::move(deltas), v, inner, math, 2, Rounding{}), out_rows, in_cols);
  PB_RETURN_IF_ERROR(RequireFinite(merged, Dtype::F64, "the weighted deltas"));  // before an SVD of Inf or NaN
  double energy = 0;
  for (double x : merged.data()) energy += x * x;
  return FromSvd(TruncatedSvd(merged, math.rank, math.seed ^ (math.module_index * 0x9E3779B97F4A7C15ull)), energy,
                 out_rows, in_cols, math);
}

}  // namespace

Result<Combined> CombineModule(const std::vector<Term>& terms, const ModuleMath& math) {
  if (terms.empty()) return Invalid("a module with no adapter to combine");
  if (NeedsDensity(math.method) && !math.density) return Invalid("--density is required");
  const size_t out_rows = terms.front().b.rows(), in_cols = terms.front().a.cols();
  const bool separate = CombinesFactorsSeparately(math.method, math.peft_compat);
  if (math.method == CombineMethod::kCat || (math.method == CombineMethod::kLinear && !separate)) {
    Combined c;
    CatForm(terms, math.peft_compat, c.a, c.b);
    c.a = Padded(c.a, math.rank, in_cols);
    c.b = Padded(c.b, out_rows, math.rank);
    return c;
  }
  if (separate) {
    Combined c = Separately(terms, math);
    c.a = Padded(c.a, math.rank, in_cols);
    c.b = Padded(c.b, out_rows, math.rank);
    return c;
  }
  if (math.method == CombineMethod::kSvd) {
    Matrix a, b;
    CatForm(terms, false, a, b);
    // Weights can overflow float64 itself (1e308 × a factor): refused here, before an SVD of Inf or NaN.
    PB_RETURN_IF_ERROR(RequireFinite(a, Dtype::F64, "the weighted factors"));
    PB_RETURN_IF_ERROR(RequireFinite(b, Dtype::F64, "the weighted factors"));
    linalg::Svd svd = linalg::LowRankSvd(b, a);
    double energy = 0;
    for (double s : svd.s) energy += s * s;
    return FromSvd(svd, energy, out_rows, in_cols, math);
  }
  return DenseSvd(terms, math);
}

namespace {

// ‖L·R‖_F from the Gram matrices: ‖L·R‖² = tr((LᵀL)(RRᵀ)).
double ProductNorm2(const Matrix& left, const Matrix& right) {
  return linalg::FrobeniusDot(linalg::MultiplyTransposedLeft(left, left),
                              linalg::MultiplyTransposedRight(right, right));
}

// ‖L·R‖_F from QR: with L = Q₁R₁ and Rᵀ = Q₂R₂, ‖L·R‖ = ‖R₁·R₂ᵀ‖, accurate whatever cancels inside L·R.
double ProductNormByQr(const Matrix& left, const Matrix& right) {
  Matrix core = linalg::MultiplyTransposedRight(linalg::QrR(left), linalg::QrR(right.Transposed()));
  return std::sqrt(linalg::FrobeniusDot(core, core));
}

// [p q] (columns side by side) and [p; q] (rows stacked).
Matrix SideBySide(const Matrix& p, const Matrix& q, double q_scale) {
  Matrix out(p.rows(), p.cols() + q.cols());
  for (size_t i = 0; i < p.rows(); ++i) {
    for (size_t j = 0; j < p.cols(); ++j) out(i, j) = p(i, j);
    for (size_t j = 0; j < q.cols(); ++j) out(i, p.cols() + j) = q_scale * q(i, j);
  }
  return out;
}
Matrix Stacked(const Matrix& p, const Matrix& q) {
  Matrix out(p.rows() + q.rows(), p.cols());
  std::copy(p.data().begin(), p.data().end(), out.data().begin());
  std::copy(q.data().begin(), q.data().end(), out.data().begin() + static_cast<ptrdiff_t>(p.data().size()));
  return out;
}

// ‖x·y − s·b·a‖ / ‖x·y‖ with both products formed: out × in values.
double DenseRelativeError(const Matrix& x, const Matrix& y, const Matrix& b, const Matrix& a, double runtime_scale) {
  const Matrix exact = linalg::Multiply(x, y), written = linalg::Multiply(b, a);
  double exact2 = 0, diff2 = 0, written2 = 0;
  for (size_t i = 0; i < exact.data().size(); ++i) {
    const double e = exact.data()[i], w = runtime_scale * written.data()[i];
    exact2 += e * e;
    written2 += w * w;
    diff2 += (e - w) * (e - w);
  }
  if (exact2 <= 0) return written2 > 0 ? 1.0 : 0.0;
  return std::sqrt(diff2 / exact2);
}

}  // namespace

double RelativeError(const std::vector<Term>& terms, const Matrix& a, const Matrix& b, double runtime_scale,
                     bool cat_form) {
  Matrix x, y;  // the exact Σ cᵢ·Bᵢ·Aᵢ = x·y (x: out × Σr, y: Σr × in)
  CatForm(terms, false, y, x);
  // The routes below hold matrices of (Σr + rank)² values. Once that is more than a million and more than ΔW's
  // out × in (ranks above the module's features), ΔW is the smaller object: the difference is formed densely,
  // so memory never exceeds the factors' own size.
  const uint64_t k_all = x.cols() + b.cols(), cells = static_cast<uint64_t>(x.rows()) * y.cols();
  if (k_all > 1024 && k_all > cells / k_all) return DenseRelativeError(x, y, b, a, runtime_scale);
  const double exact2 = ProductNorm2(x, y);
  if (exact2 <= 0) return ProductNorm2(b, a) > 0 ? 1.0 : 0.0;
  const size_t k = x.cols();
  if (cat_form && runtime_scale == 1 && b.cols() >= k) {
    // The result is the cat form rounded: b = x + Δb, a = y + Δa in its first k columns / rows (zero after), so
    // x·y − b·a = −(Δb·y + b·Δa): the differences are formed directly and nothing large cancels.
    Matrix db(x.rows(), k), da(k, y.cols());
    for (size_t i = 0; i < x.rows(); ++i)
      for (size_t j = 0; j < k; ++j) db(i, j) = b(i, j) - x(i, j);
    for (size_t i = 0; i < k; ++i)
      for (size_t j = 0; j < y.cols(); ++j) da(i, j) = a(i, j) - y(i, j);
    Matrix b_used(x.rows(), k);
    for (size_t i = 0; i < x.rows(); ++i)
      for (size_t j = 0; j < k; ++j) b_used(i, j) = b(i, j);
    return std::sqrt(std::max(0.0, ProductNorm2(SideBySide(db, b_used, 1.0), Stacked(y, da))) / exact2);
  }
  // Otherwise ‖xy‖² + s²‖ba‖² − 2s⟨xy, ba⟩ from Gram matrices; where that cancels (a result within ~1e-6 of the
  // exact sum), the QR form of the same difference, [x, −s·b]·[y; a].
  const double result2 = runtime_scale * runtime_scale * ProductNorm2(b, a);
  const double cross =
      runtime_scale * linalg::FrobeniusDot(linalg::MultiplyTransposedLeft(x, b), linalg::MultiplyTransposedRight(y, a));
  const double relative = std::sqrt(std::max(0.0, exact2 + result2 - 2 * cross) / exact2);
  if (relative > 1e-6) return relative;
  return ProductNormByQr(SideBySide(x, b, -runtime_scale), Stacked(y, a)) / std::sqrt(exact2);
}

}  // namespace pb::compose
