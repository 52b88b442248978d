// Exercise 04.1, solved: the online (max, sum) combine (see exercises/04_online_softmax for the task).
//
// Each part's sum was taken against its own max; multiplying it by e^(its max - m) moves every term
// to the common max m, since e^(x - a.m) e^(a.m - m) = e^(x - m). A part whose max is -inf holds no
// mass, and its term is written as 0: computed, it would be 0 * e^(-inf - -inf) = NaN, which would
// reach every lane of a short row through the butterfly. The kernel reads the row once for the max
// and the sum together and once more to write, so it runs at the speed of reading the row twice.
#pragma once
#include <cstdint>

#include "common/softmax_math.cuh"
#include "common/warp.cuh"

__host__ __device__ inline kl::MaxSum online_combine(kl::MaxSum a, kl::MaxSum b) {
  const float m = kl::max_nan(a.m, b.m);
  const float sa = a.m == -INFINITY ? 0.f : a.s * kl::fast_exp(a.m - m);
  const float sb = b.m == -INFINITY ? 0.f : b.s * kl::fast_exp(b.m - m);
  return {m, sa + sb};
}

// One warp per row, f32: the online pass, the warp merge, the normalise pass.
__global__ void softmax_online(const float* x, float* y, std::int64_t rows, int cols) {
  const std::int64_t row = blockIdx.x * std::int64_t{blockDim.x / 32} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  kl::MaxSum acc{-INFINITY, 0.f};
  for (int c = lane; c < cols; c += 32) acc = online_combine(acc, {xr[c], 1.f});
  for (int offset = 16; offset > 0; offset /= 2)
    acc = online_combine(
        acc, {__shfl_xor_sync(kl::kFullMask, acc.m, offset), __shfl_xor_sync(kl::kFullMask, acc.s, offset)});
  for (int c = lane; c < cols; c += 32) yr[c] = kl::fast_exp(xr[c] - acc.m) / acc.s;
}
