// Lesson 01, step 3: a grid that fills the GPU once; a partial sum per thread, one atomicAdd per thread.
#pragma once
#include <cstddef>

#include "lessons/01_naive_reduction/parts.cuh"

namespace lesson01 {

// Step 3: a grid just large enough to fill the GPU (fill_grid); each thread strides through the
// array summing into a register, then makes one atomic. n atomics become (threads in the grid).
__global__ void sum_grid_stride(const float* x, std::size_t n, float* out) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float s = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) s += x[i];
  atomicAdd(out, s);
}

inline void launch_grid_stride(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));
  sum_grid_stride<<<fill_grid(n), kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson01
