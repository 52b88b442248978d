// Lesson 03, step 4: each thread loads two elements and adds them before the tree.
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Step 4: first add during the global load. Half the threads of step 3 were idle from round one;
// now each thread loads two elements (blockDim.x apart) and adds them: half the blocks, same tree.
__global__ void reduce_first_add_on_load(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * (2 * std::size_t{blockDim.x}) + tid;
  float v = i < n ? x[i] : 0.f;
  if (i + blockDim.x < n) v += x[i + blockDim.x];
  s[tid] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

inline void launch_first_add_on_load(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_first_add_on_load, 2 * kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}

}  // namespace lesson03
