// Exercise 02.2: the warp sum of lesson 02's step 3 (warp_butterfly), which every lane receives.
//
// All 32 lanes of a warp call warp_butterfly_sum, each with its own v, and EVERY lane must return
// the sum of the 32 values. The grader uses it where every lane needs the sum: each lane divides its
// element by the sum of its warp's elements (as softmax, lesson 04, divides by a row's sum). As it
// stands it is exercise 02.1's shuffle-down reduce: lane 0 returns the sum, but every other lane
// returns something else, so 31 elements of every warp come out wrong.
//
// TODO:
//   1. Keep the five rounds (offset = 16, 8, 4, 2, 1), but take the partner's v with
//      __shfl_xor_sync(kl::kFullMask, v, offset): lane t exchanges with lane t ^ offset.
//   2. Work out, for two lanes of your choice, which of the 32 values each holds after every round,
//      and why both hold all 32 after the fifth.
// Grade it: scripts/grade.sh 02.2
#pragma once
#include "common/warp.cuh"  // kl::kFullMask

__device__ inline float warp_butterfly_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kl::kFullMask, v, offset);
  return v;  // TODO: the warp's sum in every lane, not only in lane 0
}
