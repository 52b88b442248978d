// Exercise 02.2, solved: the butterfly of step 3 (see exercises/02_warp_shuffle for the task).
//
// In the round of `offset`, lane t and lane t ^ offset swap their values and both add: the two then
// hold the same sum, over the lanes that differ from t only in the bits done so far. After offsets
// 16, 8, 4, 2, 1 every bit is done, so all 32 lanes hold the sum of all 32 values. It costs the same
// five shuffles as the shuffle-down reduce (step 3 is no slower than step 2), and saves the extra
// broadcast (a sixth shuffle, or shared memory and a barrier) that lanes 1-31 would otherwise need.
#pragma once
#include "common/warp.cuh"  // kl::kFullMask

__device__ inline float warp_butterfly_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kl::kFullMask, v, offset);
  return v;
}
