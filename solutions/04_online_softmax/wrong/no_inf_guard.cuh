// A wrong technique for exercise 04.1, kept to test the grader: the rescaling is right, but a part
// whose max is -inf is rescaled like any other. Its factor is e^(-inf - -inf) = NaN, so a lane that
// has seen nothing (any row shorter than 32) or only -inf so far turns its sum into NaN, and the
// butterfly carries that NaN to the whole row: it must fail the check.
#pragma once
#include <cstdint>

#include "common/softmax_math.cuh"
#include "common/warp.cuh"

__host__ __device__ inline kl::MaxSum online_combine(kl::MaxSum a, kl::MaxSum b) {
  const float m = kl::max_nan(a.m, b.m);
  return {m, a.s * kl::fast_exp(a.m - m) + b.s * kl::fast_exp(b.m - m)};
}

// The kernel of the exercise, unchanged.
__global__ void softmax_online(const float* x, float* y, std::int64_t rows, int cols) {
  const std::int64_t row = blockIdx.x * std::int64_t{blockDim.x / 32} + threadIdx.x / 32;
  if (row >= rows) return;
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
