// Lesson 06, step 4: 16-byte loads and stores, A transposed in shared memory. The loader (TileLoader),
// the split-column compute and the 16-byte store this step introduces are in parts.cuh, where the
// exercise and step 5 use them too.
#pragma once
#include "common/check.cuh"
#include "lessons/06_tiled_gemm/parts.cuh"

namespace lesson06 {

// 16-byte global loads, A transposed so each thread reads its 8 A values as two float4 (step 3: 8
// single reads), and 16-byte stores of D. Load, barrier, compute, barrier: one stage.
__global__ void __launch_bounds__(kThreads, 2) gemm_vector(Problem p) {
  __shared__ __align__(16) float as[kBK * Loader128::kLdA];
  __shared__ __align__(16) float bs[kBK * Loader128::kLdB];
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  Loader128 tile;
  tile.start(p, m0, n0, 0);
  float acc[8][8] = {};
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    tile.load(p, p.k);
    tile.store(as, bs);
    __syncthreads();
    compute_split(acc, as, bs);
    __syncthreads();
  }
  store_split<Plain>(p, acc, m0, n0);
}

inline void launch_vector(const Problem& p, cudaStream_t s) {
  gemm_vector<<<tile_grid(p, kBM, kBN), kThreads, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson06
