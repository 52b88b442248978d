// Deterministic random inputs: the same seed gives the same data on every machine, so a failing
// check can be replayed. Tests draw fresh data by changing the seed per shape.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/parallel.hpp"

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
  double normal() {                                                             // Box-Muller
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

// Inputs are drawn in blocks of 2^16 values, each block from its own generator (seed, block), so
// the CPU's cores can fill them in parallel and the values never depend on the thread count.
template <class Draw>
std::vector<float> draw_floats(std::size_t n, std::uint64_t seed, Draw draw) {
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  std::vector<float> v(n);
  parallel_for((n + kBlock - 1) / kBlock, [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      Rng rng(seed * 0x100000001B3ull + b);
      for (std::size_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) v[i] = draw(rng);
    }
  });
  return v;
}

inline std::vector<float> uniform_floats(std::size_t n, double lo, double hi, std::uint64_t seed) {
  return draw_floats(n, seed, [=](Rng& r) { return static_cast<float>(lo + (hi - lo) * r.uniform01()); });
}

inline std::vector<float> normal_floats(std::size_t n, double mean, double stddev, std::uint64_t seed) {
  return draw_floats(n, seed, [=](Rng& r) { return static_cast<float>(mean + stddev * r.normal()); });
}

// Whole numbers in [lo, hi]: as long as every partial sum stays below 2^24 in magnitude, float
// addition is exact in any order, so a reduction must match the reference bit for bit.
inline std::vector<float> integer_floats(std::size_t n, int lo, int hi, std::uint64_t seed) {
  return draw_floats(n, seed, [=](Rng& r) { return static_cast<float>(lo + static_cast<int>(r.index(hi - lo + 1))); });
}

// Overwrites `count` random positions with `value` (NaN, +-inf, huge numbers, ties...).
inline void sprinkle(std::vector<float>& v, float value, std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  for (std::size_t i = 0; i < count && !v.empty(); ++i) v[rng.index(v.size())] = value;
}

}  // namespace kl
