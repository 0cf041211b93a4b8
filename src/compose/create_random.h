// The fresh adapter's random numbers: the same bits on every platform and in WASM. std:: distributions differ
// across standard libraries and libm's log/cos across platforms, so everything here is our own: SplitMix64
// (Steele et al.'s generator, the one Java's SplittableRandom uses), uniform doubles from its top 53 bits, and
// Gaussians by Marsaglia's polar method with a logarithm built from exactly rounded operations only (+ - * /
// sqrt, frexp), so native and WASM give identical bytes (the library is compiled with -ffp-contract=off).
#pragma once

#include <cstdint>
#include <string_view>

namespace pb::compose {

// The seed --seed defaults to.
inline constexpr uint64_t kDefaultCreateSeed = 0;

// One module's stream: keyed by the seed and the module's name, so a module's values do not depend on which
// other modules the adapter has or on the order they are written in.
class InitStream {
 public:
  InitStream(uint64_t seed, std::string_view module_name);
  uint64_t NextBits();
  // Uniform in [0, 1), a multiple of 2^-53.
  double NextUniform();
  // Standard normal (Marsaglia's polar method; the second value of each pair is kept for the next call).
  double NextGaussian();

 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0;
};

// ln(x) for finite x > 0, within 2 ulp, from frexp and a fixed atanh series: the same bits everywhere.
double PortableLog(double x);

// PEFT's kaiming_uniform_(a=sqrt(5)) bound for fan_in, computed as torch computes it in Python floats:
// sqrt(3) * (sqrt(2 / (1 + a*a)) / sqrt(fan_in)) (about 1/sqrt(fan_in)).
double KaimingUniformBound(uint64_t fan_in);

}  // namespace pb::compose
