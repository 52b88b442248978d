// Lesson 03, step 9: step 8 in one launch: the last block to finish reduces the partials.
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Step 9: single pass. The last block to finish reduces the partials, so the second launch (and its
// launch gap, a large part of the time at small n) is gone. Protocol: publish the partial, fence,
// take a ticket; the block holding the last ticket sees every partial and resets the counter to 0
// for the next launch. The order of the final sum is fixed (by index), so the result is deterministic.
template <int kThreads, class Op, class T>
__global__ void __launch_bounds__(kThreads)
    reduce_single_pass(const float* x, std::size_t n, float* out, float* partial, unsigned* arrived) {
  __shared__ bool last;
  const float v = kl::block_allreduce<kThreads, Op>(thread_partial<kThreads, Op, T>(x, n));
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = v;
    __threadfence();  // release: our partial is visible to every SM before our ticket is
    last = atomicAdd(arrived, 1u) == gridDim.x - 1;
    if (last) {
      *arrived = 0;     // every other block has taken its ticket: nobody touches the counter again
      __threadfence();  // acquire: the others' partials, published before their tickets, are read after ours
    }
  }
  __syncthreads();
  if (!last) return;
  const float r = combine_partials<kThreads, Op>(partial, gridDim.x);
  if (threadIdx.x == 0) *out = T::post(r, n);
}

template <class Op, class T>
void launch_single_pass(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  static const std::size_t full = std::size_t(kl::sm_count()) * blocks_per_sm(reduce_single_pass<kBlock, Op, T>);
  const auto grid = static_cast<unsigned>(grid_for(n, kTileFloats, full));
  float* partial = partials_in(scratch, grid, s);
  auto* arrived = reinterpret_cast<unsigned*>(scratch.data());
  reduce_single_pass<kBlock, Op, T><<<grid, kBlock, 0, s>>>(x, n, out, partial, arrived);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson03
