// Lesson 03, step 8: registers -> warp shuffle -> shared memory -> block, with kLoads loads in flight
// per thread; a second kernel reduces the block partials. One template over the operation.
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Levels 2-4, warp -> shared memory -> block: kl::block_allreduce (common/block.cuh), shown in the
// README: a shuffle reduce per warp, one shared-memory slot per warp, the first warp reduces the slots.

// Step 8, first kernel: the hierarchy instead of the shared-memory tree, and kLoads loads in flight
// per thread instead of one: the loop is limited by DRAM, not by the latency of one load at a time.
template <int kThreads, class Op, class T>
__global__ void __launch_bounds__(kThreads) reduce_two_pass(const float* x, std::size_t n, float* partial) {
  const float v = kl::block_allreduce<kThreads, Op>(thread_partial<kThreads, Op, T>(x, n));
  if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

// Step 8, second kernel: one block reduces the block partials and applies post (sqrt, / n).
template <int kThreads, class Op, class T>
__global__ void __launch_bounds__(kThreads)
    reduce_partials(const float* partial, unsigned count, std::size_t n, float* out) {
  const float v = combine_partials<kThreads, Op>(partial, count);
  if (threadIdx.x == 0) *out = T::post(v, n);
}

template <class Op, class T>
void launch_two_pass(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  static const std::size_t full = std::size_t(kl::sm_count()) * blocks_per_sm(reduce_two_pass<kBlock, Op, T>);
  const auto grid = static_cast<unsigned>(grid_for(n, kTileFloats, full));
  float* partial = partials_in(scratch, grid, s);
  reduce_two_pass<kBlock, Op, T><<<grid, kBlock, 0, s>>>(x, n, partial);
  CUDA_CHECK_LAUNCH();
  reduce_partials<kBlock, Op, T><<<1, kBlock, 0, s>>>(partial, grid, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson03
