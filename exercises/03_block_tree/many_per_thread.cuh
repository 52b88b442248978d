// Exercise 03.2: turn step 3 into step 7 — many elements per thread.
//
// The kernel below is lesson 03's step 3, your answer to exercise 03.1: one element per thread, and
// grid_many_per_thread asks for one block per 256 elements (2^18 blocks for 2^26 floats). It is
// right, but every 256 elements pay for a whole block and its tree of 8 rounds and 8 barriers, in
// which most threads sit idle: the grader finds it about 3 times slower than the solution, below
// the bar of 80 % of its speed.
//
// The grader launches reduce_many_per_thread<<<grid_many_per_thread(n), 256, 256 * sizeof(float)>>>
// with room for grid_many_per_thread(n) partials, then adds the partials itself (only the kernel is
// timed). x comes from cudaMalloc, so it is 16-byte aligned.
//
// TODO:
//   1. grid_many_per_thread: return only the blocks that fit on the GPU at once,
//      kl::sm_count() * 8 (8 blocks of 256 threads: the 2048 threads an SM holds), or fewer when n
//      is small: one block per 4 * 256 elements, at least one.
//   2. In the kernel, see x as n / 4 float4s (reinterpret_cast<const float4*>(x)). Each thread
//      starts at its global index and loops over them in steps of the whole grid
//      (gridDim.x * blockDim.x), adding the 4 floats of each into a float in a register.
//   3. The n % 4 floats after the last float4: the first n % 4 threads of the grid add one each.
//   4. Each thread writes its register into s[tid]; the tree and the partial stay as they are.
// Use std::size_t for the indices: n can exceed 2^31.
// Grade it: scripts/grade.sh 03.2
#pragma once
#include <cstddef>

#include "common/device.cuh"  // kl::sm_count()

// The grid the grader launches for n elements (blocks of 256 threads).
inline unsigned grid_many_per_thread(std::size_t n) { return n > 256 ? static_cast<unsigned>((n + 255) / 256) : 1; }

__global__ void reduce_many_per_thread(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;  // TODO: a grid-stride loop over float4s, adding in a register
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}
