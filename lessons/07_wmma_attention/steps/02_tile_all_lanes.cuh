// Lesson 07, step 2 (tile part): all 32 lanes busy in the softmax. Its micro-kernel, softmax_two_rows
// (lanes 0-15 the even row of a pair, lanes 16-31 the odd one, each half-warp reducing its own row), is
// in parts.cuh because step 3 keeps it.
#pragma once
#include "lessons/07_wmma_attention/parts.cuh"

namespace lesson07 {

// Step 1 with lanes 16-31 on the odd rows: 8 softmax passes instead of 16, and each reduction takes 4
// shuffles inside a half-warp instead of 5 over the warp.
__global__ void tile_all_lanes(Problem pr) {
  __shared__ float s[kT * kT];
  __shared__ __half p[kT * kT];
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * kT * kT;
  tile_scores(pr.q + off, pr.k + off, s);
  __syncwarp();
  softmax_two_rows(s, p, pr.scale);
  __syncwarp();
  tile_output(p, pr.v + off, s, pr.o + off);
}

inline void launch_tile_all_lanes(const Problem& p, Workspace&, cudaStream_t s) {
  tile_all_lanes<<<static_cast<unsigned>(p.batch), 32, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson07
