// Exercise 02: write the warp reduce.
//
// All 32 lanes of a warp call warp_reduce_sum, each with its own v. It must return the sum of the
// 32 values in lane 0 (the other lanes may return anything). As it stands it returns the lane's
// own value, so lane 0 reports 1/32 of its warp and the test's sums come out wrong.
//
// TODO:
//   1. In five rounds, offset = 16, 8, 4, 2, 1, add to v the v of the lane `offset` above this
//      one, read with __shfl_down_sync(kl::kFullMask, v, offset) (kl::kFullMask = 0xffffffff,
//      every lane). All 32 lanes must take part in every round (the mask says so), even those
//      whose sum nobody will read.
//   2. Return v: after the last round lane 0 holds the warp's sum.
// Bonus: use __shfl_xor_sync instead, so that every lane returns the sum (the test passes either
// way). Why does softmax (lesson 04) want every lane to have it?
// Try it before reading common/warp.cuh, which holds the answer.
// Then: cmake --build --preset release && ctest --preset exercises
#pragma once
#include "common/warp.cuh"  // kl::kFullMask

__device__ inline float warp_reduce_sum(float v) { return v; }
