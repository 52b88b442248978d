// Exercise 04.2, solved: one warp per row (see exercises/04_online_softmax for the task).
//
// A row of 32 floats is one 128-byte line: one load instruction of the warp reads it all, the max
// and the sum are five shuffles each, and nothing waits for another warp (no shared memory, no
// barrier). Every warp of the GPU works on a row of its own, so the many short rows keep many loads
// in flight, where a block per row spends most of its time in its two block reductions: about 6x
// faster than step 3 on the H100 (exercises/README.md). Lesson 04's step 2 is faster still (about
// 1.9x this one) because it reads the row from memory once, in 16-byte packs held in registers,
// where this loop reads it three times (max, sum, write; the second and third from the cache).
#pragma once
#include <cstdint>

#include "common/softmax_math.cuh"
#include "common/warp.cuh"

// softmax(x[r, :]) for every row: max pass, sum pass, write pass, each over the lane's columns.
__global__ void softmax_warp_per_row(const float* x, float* y, std::int64_t rows, int cols) {
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / 32);
  for (std::int64_t row = blockIdx.x * std::int64_t{blockDim.x / 32} + threadIdx.x / 32; row < rows; row += warps) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = -INFINITY;  // a lane past the end of the row keeps -inf: it changes no max
    for (int c = lane; c < cols; c += 32) m = kl::max_nan(m, xr[c]);
    m = kl::warp_allreduce<kl::MaxOp>(m);
    float s = 0.f;
    for (int c = lane; c < cols; c += 32) s += kl::fast_exp(xr[c] - m);
    s = kl::warp_allreduce(s);
    for (int c = lane; c < cols; c += 32) yr[c] = kl::fast_exp(xr[c] - m) / s;
  }
}
