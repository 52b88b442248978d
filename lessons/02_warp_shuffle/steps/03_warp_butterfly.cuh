// Lesson 02, step 3: the warp sum as a butterfly (__shfl_xor_sync): every lane ends with it.
#pragma once
#include <cstddef>

#include "lessons/02_warp_shuffle/parts.cuh"

namespace lesson02 {

// Step 3: the __shfl_xor_sync butterfly, also 5 shuffles, so no faster; but every lane ends with the
// warp's sum, which softmax (lesson 04) needs: each lane divides its own values by the row sum.
__global__ void sum_warp_butterfly(const float* x, std::size_t n, float* out) {
  const float s = kl::warp_allreduce(grid_stride_partial(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

inline constexpr kl::SumLauncher launch_warp_butterfly = launch<sum_warp_butterfly, 1>;

}  // namespace lesson02
