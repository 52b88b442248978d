// Lesson 01, step 4: the block adds its threads' partials in shared memory; one atomicAdd per block.
#pragma once
#include <cstddef>

#include "lessons/01_naive_reduction/parts.cuh"

namespace lesson01 {

// Step 4: as step 3, then the block's threads add their partials in shared memory (a tree that
// halves the active threads each round) and one thread per block makes the atomic: 256x fewer.
// Lesson 03 is all about making this tree fast.
__global__ void sum_block_atomic(const float* x, std::size_t n, float* out) {
  __shared__ float partial[kBlock];
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float s = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

inline void launch_block_atomic(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));
  sum_block_atomic<<<fill_grid(n), kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson01
