// A wrong technique for exercise 02.2, kept to test the grader: exercise 02.1's shuffle-down reduce
// where every lane needs the sum. Lane 0 gets it; a lane whose source (t + offset) is past lane 31
// gets its own value back and adds it again, so lanes 1-31 end with some values missing and others
// counted twice or more (lane 31 with 32 times its own value), and their elements are divided by the
// wrong sum. It must fail the check.
#pragma once
#include "common/warp.cuh"  // kl::kFullMask

__device__ inline float warp_butterfly_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kl::kFullMask, v, offset);
  return v;
}
