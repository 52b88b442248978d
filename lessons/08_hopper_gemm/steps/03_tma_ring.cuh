// Lesson 08, step 3: a ring of TMA stages. Step 2 with three stages of shared memory, each with its own
// "full" mbarrier: the loads of the next two k-tiles are in flight while the tensor cores work on this
// one, and a tile's wgmmas are waited for only when their stage is needed again (one group stays in
// flight). The k-tile kt uses stage kt % 3 and waits for phase parity (kt / 3) % 2 of its barrier. The
// block (one warpgroup, 96 KiB) leaves room for two blocks a SM. Needs sm_90a (lesson08_hopper target).
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/hopper_parts.cuh"

namespace lesson08 {

constexpr int kW3Bm = 128, kW3Bn = 128, kW3Stages = 3;
constexpr int kW3Smem = 1024 + kW3Stages * stage_bytes<kW3Bm, kW3Bn>() + 8 * kW3Stages;

template <class T>
__global__ void __launch_bounds__(128)
    gemm_tma_ring(Problem p, TileOrder order, const __grid_constant__ GemmMaps maps) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stages = align_1024(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(stages + kW3Stages * stage_bytes<kW3Bm, kW3Bn>());
  auto stage = [&](int kt) { return stages + (kt % kW3Stages) * stage_bytes<kW3Bm, kW3Bn>(); };
  int tm, tn;
  order.tile(blockIdx.x, tm, tn);
  const int m0 = tm * kW3Bm, n0 = tn * kW3Bn, kts = (p.k + kBk - 1) / kBk;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kW3Stages; ++s) kl::mbarrier_init(full + s, 1);
    kl::mbarrier_init_fence();
    for (int kt = 0; kt < kW3Stages - 1 && kt < kts; ++kt)
      load_k_tile<kW3Bm, kW3Bn>(stage(kt), maps, full + kt % kW3Stages, m0, n0, kt);
  }
  __syncthreads();

  float acc[2][kW3Bn / 2];
  for (int kt = 0; kt < kts; ++kt) {
    kl::mbarrier_wait(full + kt % kW3Stages, (kt / kW3Stages) % 2);
    kl::wgmma_fence();
#pragma unroll
    for (int h = 0; h < 2; ++h)
      wgmma_k_tile<kW3Bn, T>(acc[h], stage(kt) + h * 64 * 128, stage(kt) + kW3Bm * 128, kt > 0);
    kl::wgmma_commit();
    kl::wgmma_wait<1>();  // k-tile kt - 1's wgmmas are done (this warp's) ...
    __syncthreads();      // ... and every warp's: its stage, the next load's, is free
    const int next = kt + kW3Stages - 1;
    if (threadIdx.x == 0 && next < kts)
      load_k_tile<kW3Bm, kW3Bn>(stage(next), maps, full + next % kW3Stages, m0, n0, next);
  }
  kl::wgmma_wait<0>();
#pragma unroll
  for (int h = 0; h < 2; ++h) store_acc<kW3Bn, T>(p, acc[h], m0 + 64 * h, n0);
}

template <class T>
void launch_tma_ring_as(const Problem& p, cudaStream_t s) {
  CUDA_CHECK(cudaFuncSetAttribute(gemm_tma_ring<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kW3Smem));
  const TileOrder order{(p.m + kW3Bm - 1) / kW3Bm, (p.n + kW3Bn - 1) / kW3Bn};
  gemm_tma_ring<T><<<order.count(), 128, kW3Smem, s>>>(p, order, gemm_maps(p, kW3Bm));
  CUDA_CHECK_LAUNCH();
}

inline void launch_tma_ring(const Problem& p, cudaStream_t s) {
  require_aligned(p);
  if (p.dtype == Dtype::bf16) launch_tma_ring_as<__nv_bfloat16>(p, s);
  else launch_tma_ring_as<__half>(p, s);
}

}  // namespace lesson08
