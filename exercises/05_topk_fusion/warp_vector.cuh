// Exercise 05.2: turn step 2 into step 3 — 16-byte loads and an early reject.
//
// The kernel below is lesson 05's step 2: each lane reads one float at a time and inserts every
// logit into its sorted list of KC keys. It is right, but at 4096 rows of 50257 logits and k = 10
// (a list of 16) the insertions and the 4-byte loads make it about half as fast as the solution,
// below the bar of 80 % of its speed. The grader launches it as step 2: one warp per row, 8 rows
// per block of 256 threads.
//
// TODO:
//   1. Read the row in packs of 4 floats, one 16-byte load each (kl::load_pack<4>): lane t takes
//      packs t, t + 32, t + 64, ... A pack must start on a 16-byte boundary, and a row starts
//      wherever x + row * vocab falls: kl::PackSplit<4, float, int> splits the row into a head (the
//      logits before the first boundary), whole packs, and a tail (the logits after the last one).
//   2. The head and the tail hold at most 3 logits each: lane t takes the t-th one, if any.
//   3. Early reject: keep the lane's KC-th best logit (lesson05::key_value(part.keys[KC - 1]), NaN
//      while the list is not full) in part.threshold, and insert a logit only if it is not below it.
//   4. For a pack: lesson05::add_pack_to_sum updates (m, s) with its 4 logits and returns their max;
//      when that max is below the threshold, none of the 4 can enter.
// Grade it: scripts/grade.sh 05.2
#pragma once
#include <cstdint>

#include "common/pack.cuh"
#include "lessons/05_topk_fusion/parts.cuh"  // Key, make_key, Partial, add_to_sum, add_pack_to_sum, ...

// Step 3, f32: each lane folds its share of the row into its (max, sum) and its list of KC keys,
// then the warp merges the 32 lists and writes k (probability, index) pairs, k <= KC.
template <int KC>
__global__ void __launch_bounds__(32 * lesson05::kWarpsPerBlock)
    topk_warp_vector(const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{lesson05::kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * vocab;
  lesson05::Partial<KC> part;
  for (int c = lane; c < vocab; c += 32) {  // TODO: 16-byte loads of 4 logits, the early reject
    const float v = xr[c];
    lesson05::add_to_sum(part.m, part.s, v);
    lesson05::insert_sorted(part.keys, lesson05::make_key(v, c));
  }
  lesson05::finish_warp(part, k, lane, prob + row * k, idx + row * k);
}
