// Lesson 02, step 5: kUnroll float4 loads in flight per thread instead of one.
#pragma once
#include <cstddef>

#include "lessons/02_warp_shuffle/parts.cuh"

namespace lesson02 {

// Step 5: step 4 with kUnroll loads in flight per thread: the partial sum is float4_unrolled_partial
// (parts.cuh, since step 6 uses it too).
template <int kUnroll>
__global__ void sum_float4_unrolled(const float* x, std::size_t n, float* out) {
  const float s = kl::warp_reduce(float4_unrolled_partial<kUnroll>(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

inline constexpr kl::SumLauncher launch_float4_unrolled =
    launch<sum_float4_unrolled<kUnroll>, 4 * kUnroll, kUnrolledBlocksPerSm>;

}  // namespace lesson02
