// Lesson 02, step 6: step 5's loads (float4_unrolled_partial, from parts.cuh)
// with the warp sum from the library, cooperative_groups::reduce.
#pragma once
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include <cstddef>

#include "lessons/02_warp_shuffle/parts.cuh"

namespace lesson02 {

namespace cg = cooperative_groups;

// Step 6: step 5 with the warp sum from the library: cooperative_groups::reduce on a 32-thread
// tile. Not faster: for floats it compiles to step 3's 5 butterfly shuffles (every lane gets the sum).
template <int kUnroll>
__global__ void sum_cg_reduce(const float* x, std::size_t n, float* out) {
  const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
  const float s = cg::reduce(warp, float4_unrolled_partial<kUnroll>(x, n), cg::plus<float>());
  if (warp.thread_rank() == 0) atomicAdd(out, s);
}

inline constexpr kl::SumLauncher launch_cg_reduce = launch<sum_cg_reduce<kUnroll>, 4 * kUnroll, kUnrolledBlocksPerSm>;

}  // namespace lesson02
