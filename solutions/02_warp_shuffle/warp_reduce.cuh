// Exercise 02.1, solved: the warp reduce of step 2 (see exercises/02_warp_shuffle for the task).
//
// Each round adds the value `offset` lanes above: after offset 16 lane t < 16 holds x[t] + x[t+16],
// after offset 8 lane t < 8 holds four values, and after five rounds lane 0 holds all 32. The lanes
// exchange registers directly (one shuffle instruction a round), with no shared memory and no
// barrier: step 2 drops the block tree's 8 __syncthreads and its idle threads, and makes one atomic
// per warp instead of one per block.
#pragma once
#include "common/warp.cuh"  // kl::kFullMask

__device__ inline float warp_reduce_sum(float v) {
  // Each round halves the lanes whose value still matters: 32 -> 16 -> 8 -> 4 -> 2 -> 1 (lane 0).
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kl::kFullMask, v, offset);
  return v;
}
