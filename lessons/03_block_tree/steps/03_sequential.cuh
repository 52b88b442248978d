// Lesson 03, step 3: the tree with sequential addressing: no bank conflicts.
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Step 3: sequential addressing. Thread t adds s[t + half] into s[t]: the 32 lanes of a warp read 32
// consecutive words, one per bank, so no conflicts, and the active threads stay packed.
__global__ void reduce_sequential(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

inline void launch_sequential(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_sequential, kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}

}  // namespace lesson03
