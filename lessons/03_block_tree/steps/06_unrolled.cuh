// Lesson 03, step 6: the block size a template parameter, so the tree unrolls completely.
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Step 6: fully unrolled by a template block size. Step 5 with kThreads a template parameter: no
// loop counter, no runtime blockDim.x, fewer instructions per round.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) reduce_unrolled(const float* x, std::size_t n, float* partial) {
  const std::size_t i = blockIdx.x * (2 * std::size_t{kThreads}) + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  if (i + kThreads < n) v += x[i + kThreads];
  v = unrolled_tree<kThreads>(v);
  if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

inline void launch_unrolled(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_unrolled<kBlock>, 2 * kBlock, kNoLimit, 0}, x, n, out, scratch, s);
}

}  // namespace lesson03
