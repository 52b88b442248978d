// Lesson 03, step 2: the interleaved tree with the active threads packed: no divergence, bank conflicts.
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Step 2: the same pairs, but thread t handles pair t (index = 2*stride*t): active threads are now
// packed into the first warps, so whole warps retire. Faster, but the stride between the lanes'
// addresses is 2*stride words: 2-way, 4-way, ... shared-memory bank conflicts.
__global__ void reduce_interleaved_strided(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
    const unsigned index = 2 * stride * tid;
    if (index < blockDim.x) s[index] += s[index + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

inline void launch_interleaved_strided(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_interleaved_strided, kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}

}  // namespace lesson03
