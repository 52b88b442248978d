// A wrong technique for exercise 02.1, kept to test the grader: the shuffle goes the other way,
// __shfl_up_sync. A lane whose source lane (t - offset) is below 0 gets its own value back, so lane 0
// adds its own value to itself in all five rounds and returns 32 times x[0]; the sum gathers in
// lane 31 instead. It must fail the check (lane 0's result).
#pragma once
#include "common/warp.cuh"  // kl::kFullMask

__device__ inline float warp_reduce_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_up_sync(kl::kFullMask, v, offset);
  return v;
}
