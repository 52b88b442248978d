// A wrong technique for exercise 01.2, kept to test the grader: step 3 as it is, one atomicAdd per
// thread of the grid. Right, but the same-address atomics serialise: it must fail the speed bar.
#pragma once
#include <cstddef>

__global__ void sum_block_atomic(const float* x, std::size_t n, float* out) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float s = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) s += x[i];
  atomicAdd(out, s);
}
