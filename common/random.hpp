// Deterministic random inputs: the same seed gives the same data on every machine, so a failing
// check can be replayed. Tests draw fresh data by changing the seed per shape.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace kl {

// splitmix64: tiny, fast, and good enough for test data.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {  // Box-Muller
    const double u1 = 1.0 - uniform01(), u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  std::size_t index(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t state_;
};

// KL_SEED in the environment shifts every seed: run the tests again on other data.
inline std::uint64_t seed_for(std::uint64_t salt) {
  const char* env = std::getenv("KL_SEED");
  return (env ? std::strtoull(env, nullptr, 10) : 0) * 1000003ull + salt;
}

inline std::vector<float> uniform_floats(std::size_t n, double lo, double hi, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(lo + (hi - lo) * rng.uniform01());
  return v;
}

inline std::vector<float> normal_floats(std::size_t n, double mean, double stddev, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(mean + stddev * rng.normal());
  return v;
}

// Whole numbers in [lo, hi]: as long as every partial sum stays below 2^24 in magnitude, float
// addition is exact in any order, so a reduction must match the reference bit for bit.
inline std::vector<float> integer_floats(std::size_t n, int lo, int hi, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(lo + static_cast<int>(rng.index(hi - lo + 1)));
  return v;
}

// Overwrites `count` random positions with `value` (NaN, +-inf, huge numbers, ties...).
inline void sprinkle(std::vector<float>& v, float value, std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  for (std::size_t i = 0; i < count && !v.empty(); ++i) v[rng.index(v.size())] = value;
}

}  // namespace kl
