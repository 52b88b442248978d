// Lesson 05's problem: for each row of logits [R, V], the K largest softmax probabilities and their
// indices, sorted by probability (ties: the lower index first). Logits are f32, f16 or bf16 (loaded in
// that type, arithmetic in float); the outputs are always float probabilities and int indices.
// Here: the problem as the kernels see it, its limits and validation. Its float64 reference, the error
// measure and tolerance, the shapes and the inputs are in host.cuh.
#pragma once
#include <climits>
#include <cstdint>
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

}  // namespace lesson05
