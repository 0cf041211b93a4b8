#include "compose/create_random.h"

#include <cmath>

namespace pb::compose {
namespace {

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// FNV-1a, 64 bits: the module name's key.
uint64_t NameHash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

InitStream::InitStream(uint64_t seed, std::string_view module_name) : state_(Mix(seed ^ Mix(NameHash(module_name)))) {}

uint64_t InitStream::NextBits() {
  state_ += 0x9e3779b97f4a7c15ULL;
  return Mix(state_);
}

double InitStream::NextUniform() { return double(NextBits() >> 11) * 0x1.0p-53; }

double InitStream::NextGaussian() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  for (;;) {
    const double u = 2.0 * NextUniform() - 1.0, v = 2.0 * NextUniform() - 1.0;
    const double s = u * u + v * v;
    if (s >= 1.0 || s == 0.0) continue;
    const double factor = std::sqrt(-2.0 * PortableLog(s) / s);
    spare_ = v * factor;
    has_spare_ = true;
    return u * factor;
  }
}

double PortableLog(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // exact: x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;  // exact
    --e;
  }
  // m in [sqrt(1/2), sqrt(2)): ln m = 2 atanh(f), f = (m - 1) / (m + 1), |f| < 0.1716, f^2 < 0.0295.
  const double f = (m - 1.0) / (m + 1.0), f2 = f * f;
  double sum = 0.0;
  for (int k = 27; k >= 1; k -= 2) sum = 1.0 / k + f2 * sum;  // 1 + f²/3 + f⁴/5 + …, Horner, 14 terms
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  const double de = double(e);
  return de * kLn2Hi + (2.0 * f * sum + de * kLn2Lo);
}

double KaimingUniformBound(uint64_t fan_in) {
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double std_dev = gain / std::sqrt(double(fan_in));
  return std::sqrt(3.0) * std_dev;
}

}  // namespace pb::compose
