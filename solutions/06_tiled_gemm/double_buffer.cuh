// Exercise 06.1, solved: step 4 turned into step 5 (see exercises/06_tiled_gemm for the task).
//
// Two shared-memory stages. Tile k+1's global loads are issued before tile k's FMAs and stored into
// the other stage after them, so their latency hides behind the math. One barrier per tile is
// enough: the stage a store overwrites was last read in the previous iteration, which every warp
// finished before that iteration's barrier. At 4096^3 on the H100 two blocks share an SM and already
// hide each other's loads, so this gains little over step 4 (3.02 against 3.10 ms); at 1024^3, one
// block an SM, ~20 %.
#pragma once
#include "lessons/06_tiled_gemm/parts.cuh"

using lesson06::kBK;
using lesson06::kBM;
using lesson06::kBN;
using lesson06::Loader128;

constexpr int kStages = 2;

__global__ void __launch_bounds__(lesson06::kThreads, 2) gemm_double_buffer(lesson06::Problem p) {
  __shared__ __align__(16) float as[kStages][kBK * Loader128::kLdA];
  __shared__ __align__(16) float bs[kStages][kBK * Loader128::kLdB];
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  Loader128 tile;
  tile.start(p, m0, n0, 0);
  float acc[8][8] = {};
  tile.load(p, p.k);
  tile.store(as[0], bs[0]);
  __syncthreads();
  int stage = 0;
#pragma unroll 2  // constant stage addresses in each copy: no spill under the 128-register cap
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    const bool more = k0 + kBK < p.k;
    if (more) tile.load(p, p.k);  // tile k+1 into registers: in flight during the FMAs below
    lesson06::compute_split(acc, as[stage], bs[stage]);
    if (more) tile.store(as[stage ^ 1], bs[stage ^ 1]);
    __syncthreads();
    stage ^= 1;
  }
  lesson06::store_split<lesson06::Plain>(p, acc, m0, n0);
}
