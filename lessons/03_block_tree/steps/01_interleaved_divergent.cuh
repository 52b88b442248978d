// Lesson 03, step 1: a shared-memory tree with interleaved addressing, divergent warps. As in steps
// 2-7, every block writes the sum of its elements to partial[blockIdx.x], and the launcher repeats
// the kernel on the partials until one block is left (reduce_in_passes, parts.cuh).
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Step 1: interleaved addressing. In round `stride` the threads whose index is a multiple of
// 2*stride add their neighbour: active threads are scattered over every warp (divergence), and % is slow.
__global__ void reduce_interleaved_divergent(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
    if (tid % (2 * stride) == 0) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

inline void launch_interleaved_divergent(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_interleaved_divergent, kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}

}  // namespace lesson03
