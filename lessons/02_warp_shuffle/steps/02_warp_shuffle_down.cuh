// Lesson 02, step 2: the warp adds through registers (__shfl_down_sync); one atomicAdd per warp.
#pragma once
#include <cstddef>

#include "lessons/02_warp_shuffle/parts.cuh"

namespace lesson02 {

// Step 2: the block's shared-memory tree (8 rounds, 8 __syncthreads, idle threads) becomes a warp
// reduce in registers: 5 __shfl_down_sync, no shared memory, no barrier; lane 0 makes one atomic per warp.
__global__ void sum_warp_shuffle_down(const float* x, std::size_t n, float* out) {
  const float s = kl::warp_reduce(grid_stride_partial(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

inline constexpr kl::SumLauncher launch_warp_shuffle_down = launch<sum_warp_shuffle_down, 1>;

}  // namespace lesson02
