// Lesson 03, step 5: the last 64 values summed by one warp with shuffles.
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Step 5: unrolled last warp. Once 64 values are left, warp 0 finishes alone: no __syncthreads and
// no half-idle shared-memory rounds, just 5 shuffles in registers (lesson 02's warp reduce). The
// classic version used a volatile shared pointer without any sync: a data race since Volta.
__global__ void reduce_unrolled_last_warp(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * (2 * std::size_t{blockDim.x}) + tid;
  float v = i < n ? x[i] : 0.f;
  if (i + blockDim.x < n) v += x[i + blockDim.x];
  s[tid] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 32; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid < 32) {
    v = kl::warp_reduce(s[tid] + s[tid + 32]);
    if (tid == 0) partial[blockIdx.x] = v;
  }
}

inline void launch_unrolled_last_warp(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_unrolled_last_warp, 2 * kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}

}  // namespace lesson03
