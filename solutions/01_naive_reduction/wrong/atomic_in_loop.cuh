// A wrong technique for exercise 01.1, kept to test the grader: the grid-stride loop is there, but
// every element is still its own atomicAdd. Right, and as slow as step 2: it must fail the speed bar.
#pragma once
#include <cstddef>

__global__ void sum_grid_stride(const float* x, std::size_t n, float* out) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) atomicAdd(out, x[i]);
}
