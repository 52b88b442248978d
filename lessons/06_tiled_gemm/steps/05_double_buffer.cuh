// Lesson 06, step 5: double buffering (step 4's loader, compute and store, from parts.cuh).
#pragma once
#include "common/check.cuh"
#include "lessons/06_tiled_gemm/parts.cuh"

namespace lesson06 {

// Two shared-memory stages. The loads of tile k+1 are issued before tile k's FMAs and stored to the
// other stage after them, so their latency hides behind the math; one barrier per tile (step 4: two).
// D goes through Epi: Plain in the step table; gemm() runs the kernel with its Runtime epilogue
// (gemm.cuh) below sm_80, where step 6's kernel cannot run.
template <class Epi>
__global__ void __launch_bounds__(kThreads, 2) gemm_double_buffer(Problem p) {
  __shared__ __align__(16) float as[2][kBK * Loader128::kLdA];
  __shared__ __align__(16) float bs[2][kBK * Loader128::kLdB];
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  Loader128 tile;
  tile.start(p, m0, n0, 0);
  float acc[8][8] = {};
  tile.load(p, p.k);
  tile.store(as[0], bs[0]);
  __syncthreads();
  int stage = 0;
// Unrolled by two, each copy names its stages by constants: no registers for the stage addresses, which
// under the 128-register cap of two blocks an SM would spill (ptxas: 20 bytes) inside the loop.
#pragma unroll 2
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    const bool more = k0 + kBK < p.k;
    if (more) tile.load(p, p.k);
    compute_split(acc, as[stage], bs[stage]);
    if (more) tile.store(as[stage ^ 1], bs[stage ^ 1]);
    __syncthreads();
    stage ^= 1;
  }
  store_split<Epi>(p, acc, m0, n0);
}

template <class Epi>
void launch_double_buffer(const Problem& p, cudaStream_t s) {
  gemm_double_buffer<Epi><<<tile_grid(p, kBM, kBN), kThreads, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson06
