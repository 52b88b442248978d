// Lesson 07, step 3 (tile part): several tiles per block. kTileWarps (8) and tile_blocks are in
// parts.cuh (step 4 keeps them).
#pragma once
#include "lessons/07_wmma_attention/parts.cuh"

namespace lesson07 {

// Step 2 with one tile per warp and 8 warps per block: a one-warp block leaves most of an SM's warp
// slots empty (at most 32 blocks, so 32 warps, per SM hide the latency); 8-warp blocks give up to 64.
__global__ void tile_multi_warp(Problem pr) {
  __shared__ float s[kTileWarps][kT * kT];
  __shared__ __half p[kTileWarps][kT * kT];
  const int w = threadIdx.x / 32;
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kTileWarps + w;
  if (tile >= pr.batch) return;  // whole warps leave; no block-wide barrier follows
  const std::int64_t off = tile * kT * kT;
  tile_scores(pr.q + off, pr.k + off, s[w]);
  __syncwarp();
  softmax_two_rows(s[w], p[w], pr.scale);
  __syncwarp();
  tile_output(p[w], pr.v + off, s[w], pr.o + off);
}

inline void launch_tile_multi_warp(const Problem& p, Workspace&, cudaStream_t s) {
  tile_multi_warp<<<tile_blocks(p), 32 * kTileWarps, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson07
