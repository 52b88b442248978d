// Exercise 06.1: turn step 4 into step 5 — double buffering.
//
// The kernel below is lesson 06's step 4: for every K-slice of kBK = 16 it loads the next A and B
// tiles (through registers) into ONE shared-memory stage, waits at a barrier, computes, and waits
// again before the next load may overwrite the stage, so the FMAs stall while the tiles travel from
// global memory. It is right, but the grader checks that the kernel holds two shared-memory stages,
// and it holds one.
//
// Given (lessons/06_tiled_gemm/parts.cuh): the 128 x 128 x 16 block tile, the 16-byte tile loader
// Loader128 (tile.start, tile.load into registers, tile.store into a stage), compute_split and
// store_split (the 8x8 outputs of each thread, through the epilogue into D).
//
// TODO:
//   1. Give the shared tiles two stages: as[2][...], bs[2][...] (kStages = 2).
//   2. Before the loop: load tile 0 into stage 0, then one barrier.
//   3. In the loop, for tile k: issue the global loads of tile k+1 into registers (tile.load) first,
//      compute tile k from its stage, then store the registers into the OTHER stage (tile.store),
//      then ONE barrier, and flip the stage. Why is one barrier enough? Which stage can a slow warp
//      still be reading when a fast warp stores?
//   4. Before writing code, predict the speed-up of step 5 over step 4 at 4096^3 on your GPU; then
//      measure it with `lesson06 --step vector` and `lesson06 --step double_buffer`.
// Grade it: scripts/grade.sh 06.1
#pragma once
#include "lessons/06_tiled_gemm/parts.cuh"

using lesson06::kBK;
using lesson06::kBM;
using lesson06::kBN;
using lesson06::Loader128;

constexpr int kStages = 1;  // TODO: 2

__global__ void __launch_bounds__(lesson06::kThreads, 2) gemm_double_buffer(lesson06::Problem p) {
  __shared__ __align__(16) float as[kStages][kBK * Loader128::kLdA];
  __shared__ __align__(16) float bs[kStages][kBK * Loader128::kLdB];
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  Loader128 tile;
  tile.start(p, m0, n0, 0);
  float acc[8][8] = {};
  for (int k0 = 0; k0 < p.k; k0 += kBK) {  // TODO: prefetch tile k0 + kBK while computing tile k0
    tile.load(p, p.k);
    tile.store(as[0], bs[0]);
    __syncthreads();
    lesson06::compute_split(acc, as[0], bs[0]);
    __syncthreads();
  }
  lesson06::store_split<lesson06::Plain>(p, acc, m0, n0);
}
