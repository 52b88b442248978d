// A wrong technique for exercise 06.1, kept to test the grader: tile k+1's loads are issued into
// registers before tile k's FMAs, as in step 5, but stored into the ONE shared-memory stage, which
// then needs a barrier before the store (every warp done reading it) and one after (the store done).
// Right, and about as fast as step 5 at 4096^3, but it holds one stage: it must fail the check.
#pragma once
#include "lessons/06_tiled_gemm/parts.cuh"

using lesson06::kBK;
using lesson06::kBM;
using lesson06::kBN;
using lesson06::Loader128;

__global__ void __launch_bounds__(lesson06::kThreads, 2) gemm_double_buffer(lesson06::Problem p) {
  __shared__ __align__(16) float as[kBK * Loader128::kLdA];
  __shared__ __align__(16) float bs[kBK * Loader128::kLdB];
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  Loader128 tile;
  tile.start(p, m0, n0, 0);
  float acc[8][8] = {};
  tile.load(p, p.k);
  tile.store(as, bs);
  __syncthreads();
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    const bool more = k0 + kBK < p.k;
    if (more) tile.load(p, p.k);
    lesson06::compute_split(acc, as, bs);
    __syncthreads();
    if (more) tile.store(as, bs);
    __syncthreads();
  }
  lesson06::store_split<lesson06::Plain>(p, acc, m0, n0);
}
