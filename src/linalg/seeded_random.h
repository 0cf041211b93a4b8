// The random numbers of DARE's masks, combine's and extract's randomized SVD test matrices: SplitMix64, seeded
// per use from the user's --seed and the use's identity (module, adapter, factor; none for a plain seed), so a
// result depends on neither the order work is done in nor the platform (integer arithmetic only; the same bits
// natively and in WASM). In linalg because linalg depends on nothing and compose uses it too.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace pb::linalg {

class SeededRandom {
 public:
  // A stream for `seed` and the identity of its use.
  SeededRandom(uint64_t seed, std::initializer_list<uint64_t> identity) : state_(Mix(seed)) {
    for (uint64_t id : identity) state_ = Mix(state_ ^ Mix(id + 0x632BE59BD9B4E019ull));
  }
  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return Mix(state_);
  }
  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform in [−1, 1), 53 random bits.
  double Symmetric() { return static_cast<double>(Next() >> 11) * (1.0 / 4503599627370496.0) - 1.0; }

 private:
  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

}  // namespace pb::linalg
