// Lesson 05's problem: for each row of logits [R, V], the K largest softmax probabilities and their
// indices, sorted by probability (ties: the lower index first); and the sampler's, a token per row
// drawn from them (SampleParams). Logits are f32, f16 or bf16 (loaded in
// that type, arithmetic in float); the outputs are always float probabilities and int indices.
// Here: the problem as the kernels see it, its limits and validation. Its float64 reference, the error
// measure and tolerance, the shapes and the inputs are in host.cuh.
#pragma once
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/check.cuh"
#include "common/pack.cuh"

namespace lesson05 {

using namespace kl::dtypes;  // Dtype, dtype_of, with_type, ... (common/pack.cuh)

// One top-K call: x holds rows x vocab logits of dtype; prob and idx receive rows x k results.
struct Problem {
  const void* x = nullptr;
  float* prob = nullptr;
  int* idx = nullptr;
  std::int64_t rows = 0;
  int vocab = 0, k = 0;
  Dtype dtype = Dtype::f32;
};

constexpr int kMaxK = 64;

// The longest row: the kernels index a row in int and run up to 8191 past its end: step 5's block
// scans 4 x 256 packs of 8 at a time (scan_select), and step 6's last slice may end up to 8 x 1024
// past V (slice_length). Longer rows would wrap an index.
constexpr int kMaxVocab = INT_MAX - 8191;  // 2^31 - 8192

// Step 5 launches a block per row, and a grid holds at most 2^31 - 1 blocks.
constexpr std::int64_t kMaxRows = INT_MAX;

// Refuses what no step can do, before anything is launched: K outside 1..64, or K > V (a row has
// only V probabilities to pick from).
inline void validate(const Problem& p) {
  if (p.k < 1 || p.k > kMaxK)
    throw kl::UsageError("K = " + std::to_string(p.k) + " is out of range: K must be 1 to 64");
  if (p.vocab < 1) throw kl::UsageError("V = " + std::to_string(p.vocab) + ": a row needs at least one logit");
  if (p.vocab > kMaxVocab)
    throw kl::UsageError("V = " + std::to_string(p.vocab) +
                         " is too large (at most 2^31 - 8192: rows are indexed in int)");
  if (p.k > p.vocab)
    throw kl::UsageError("K = " + std::to_string(p.k) + " is larger than V = " + std::to_string(p.vocab) +
                         ": a row has only V probabilities");
  if (p.rows < 0) throw kl::UsageError("R = " + std::to_string(p.rows) + " is negative");
}

// What to draw from: softmax(x / temperature) over the top_k best, cut to the nucleus of mass top_p.
// Row r draws from Philox's subsequence r at `offset`: a decoder passes its step as the offset, so
// that every step draws fresh numbers and a rerun draws the same ones.
struct SampleParams {
  float temperature = 1.f;
  int top_k = 50;
  float top_p = 1.f;
  std::uint64_t seed = 0, offset = 0;
};

// Refuses, before anything is launched, a temperature that is not a positive finite number, a top_p
// outside (0, 1], a top_k outside 1..64 or above V.
inline void validate(const SampleParams& sp, int vocab) {
  const auto text = [](float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (!(sp.temperature > 0.f) || !std::isfinite(sp.temperature))
    throw kl::UsageError("temperature = " + text(sp.temperature) + ": it must be a positive finite number");
  if (!(sp.top_p > 0.f && sp.top_p <= 1.f))
    throw kl::UsageError("top_p = " + text(sp.top_p) + ": it must be in (0, 1]");
  if (sp.top_k < 1 || sp.top_k > kMaxK)
    throw kl::UsageError("top_k = " + std::to_string(sp.top_k) + ": it must be 1 to 64");
  if (sp.top_k > vocab)
    throw kl::UsageError("top_k = " + std::to_string(sp.top_k) + " is larger than V = " + std::to_string(vocab));
}

}  // namespace lesson05
