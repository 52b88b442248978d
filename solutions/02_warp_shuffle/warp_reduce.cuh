// Exercise 02, solved: the warp reduce with shuffles (see exercises/02_warp_shuffle for the task).
#pragma once
#include "common/warp.cuh"  // kl::kFullMask

__device__ inline float warp_reduce_sum(float v) {
  // Each round halves the lanes whose value still matters: 32 -> 16 -> 8 -> 4 -> 2 -> 1 (lane 0).
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kl::kFullMask, v, offset);
  return v;
}
