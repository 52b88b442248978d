// Lesson 08, step 2: wgmma from shared memory, tiles loaded by TMA. One warpgroup (4 warps) computes a
// 128 x 128 tile of D as two 64 x 128 halves; per 64-wide k-tile, one thread asks the copy engine for
// A's and B's boxes (swizzled, zero-filled past the matrix), everyone waits on an mbarrier, and the
// group issues 8 wgmma m64n128k16 that read both operands from shared memory: 8 instructions where
// step 1's warps issue 512 mma.sync and 64 ldmatrix. One stage: loads and math still take turns.
// Needs sm_90a (lesson08_hopper target).
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/hopper_parts.cuh"

namespace lesson08 {

constexpr int kW2Bm = 128, kW2Bn = 128;
constexpr int kW2Smem = 1024 + stage_bytes<kW2Bm, kW2Bn>() + 8;  // alignment slack, one stage, one mbarrier

template <class T>
__global__ void __launch_bounds__(128) gemm_wgmma(Problem p, TileOrder order, const __grid_constant__ GemmMaps maps) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stage = align_1024(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(stage + stage_bytes<kW2Bm, kW2Bn>());
  if (threadIdx.x == 0) {
    kl::mbarrier_init(full, 1);
    kl::mbarrier_init_fence();
  }
  __syncthreads();
  int tm, tn;
  order.tile(blockIdx.x, tm, tn);
  const int m0 = tm * kW2Bm, n0 = tn * kW2Bn, kts = (p.k + kBk - 1) / kBk;

  float acc[2][kW2Bn / 2];
  for (int kt = 0; kt < kts; ++kt) {
    if (threadIdx.x == 0) load_k_tile<kW2Bm, kW2Bn>(stage, maps, full, m0, n0, kt);
    kl::mbarrier_wait(full, kt % 2);  // the barrier's phase kt completed: the bytes have landed
    kl::wgmma_fence();
#pragma unroll
    for (int h = 0; h < 2; ++h) wgmma_k_tile<kW2Bn, T>(acc[h], stage + h * 64 * 128, stage + kW2Bm * 128, kt > 0);
    kl::wgmma_commit();
    kl::wgmma_wait<0>();
    __syncthreads();  // every warp has read the stage before the next tile's TMA overwrites it
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) store_acc<kW2Bn, T>(p, acc[h], m0 + 64 * h, n0);
}

template <class T>
void launch_wgmma_as(const Problem& p, cudaStream_t s) {
  CUDA_CHECK(cudaFuncSetAttribute(gemm_wgmma<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kW2Smem));
  const TileOrder order{(p.m + kW2Bm - 1) / kW2Bm, (p.n + kW2Bn - 1) / kW2Bn};
  gemm_wgmma<T><<<order.count(), 128, kW2Smem, s>>>(p, order, gemm_maps(p, kW2Bm));
  CUDA_CHECK_LAUNCH();
}

inline void launch_wgmma(const Problem& p, cudaStream_t s) {
  require_aligned(p);
  if (p.dtype == Dtype::bf16) launch_wgmma_as<__nv_bfloat16>(p, s);
  else launch_wgmma_as<__half>(p, s);
}

}  // namespace lesson08
