// Lesson 08, step 5: a persistent kernel. Step 4 launches one block per tile, and each block fills its
// pipeline, drains it and stores while the SM's tensor cores wait. Here one block a SM walks the tiles
// (t = blockIdx.x, + gridDim.x, ...) in TileOrder's grouped order, and the ring of stages runs on across
// tiles: while the consumers store one tile, the producer already loads the next one's k-tiles. The
// stage and phase come from one running count of k-tiles. Needs sm_90a (lesson08_hopper target).
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/hopper_parts.cuh"

namespace lesson08 {

constexpr int kW5Bm = 128, kW5Bn = 256, kW5Stages = 4, kW5Threads = 384;
constexpr int kW5Smem = 1024 + kW5Stages * stage_bytes<kW5Bm, kW5Bn>() + 16 * kW5Stages;

template <class T>
__global__ void __launch_bounds__(kW5Threads, 1)
    gemm_persistent(Problem p, TileOrder order, const __grid_constant__ GemmMaps maps) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stages = align_1024(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(stages + kW5Stages * stage_bytes<kW5Bm, kW5Bn>());
  std::uint64_t* empty = full + kW5Stages;
  auto stage = [&](int it) { return stages + (it % kW5Stages) * stage_bytes<kW5Bm, kW5Bn>(); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kW5Stages; ++s) {
      kl::mbarrier_init(full + s, 1);
      kl::mbarrier_init(empty + s, 8);
    }
    kl::mbarrier_init_fence();
  }
  __syncthreads();
  const int kts = (p.k + kBk - 1) / kBk, group = threadIdx.x / 128;

  if (group == 0) {
    kl::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      int it = 0;  // k-tiles loaded so far, over all of this block's tiles
      for (int t = blockIdx.x; t < order.count(); t += gridDim.x) {
        int tm, tn;
        order.tile(t, tm, tn);
        for (int kt = 0; kt < kts; ++kt, ++it) {
          kl::mbarrier_wait(empty + it % kW5Stages, (it / kW5Stages + 1) % 2);
          load_k_tile<kW5Bm, kW5Bn>(stage(it), maps, full + it % kW5Stages, tm * kW5Bm, tn * kW5Bn, kt);
        }
      }
    }
  } else {
    kl::setmaxnreg_inc<kConsumerRegs>();
    const int rows = 64 * (group - 1);
    int it = 0;
    float acc[kW5Bn / 2];
    for (int t = blockIdx.x; t < order.count(); t += gridDim.x) {
      int tm, tn;
      order.tile(t, tm, tn);
      for (int kt = 0; kt < kts; ++kt, ++it) {
        kl::mbarrier_wait(full + it % kW5Stages, (it / kW5Stages) % 2);
        kl::wgmma_fence();
        wgmma_k_tile<kW5Bn, T>(acc, stage(it) + rows * 128, stage(it) + kW5Bm * 128, kt > 0);
        kl::wgmma_commit();
        kl::wgmma_wait<0>();
        if (threadIdx.x % 32 == 0) kl::mbarrier_arrive(empty + it % kW5Stages);
      }
      store_acc<kW5Bn, T>(p, acc, tm * kW5Bm + rows, tn * kW5Bn);
    }
  }
}

// One block a SM, or fewer when there are fewer tiles.
template <class T>
void launch_persistent_as(const Problem& p, cudaStream_t s) {
  CUDA_CHECK(cudaFuncSetAttribute(gemm_persistent<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kW5Smem));
  const TileOrder order{(p.m + kW5Bm - 1) / kW5Bm, (p.n + kW5Bn - 1) / kW5Bn};
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int blocks = order.count() < sms ? order.count() : sms;
  gemm_persistent<T><<<blocks, kW5Threads, kW5Smem, s>>>(p, order, gemm_maps(p, kW5Bm));
  CUDA_CHECK_LAUNCH();
}

inline void launch_persistent(const Problem& p, cudaStream_t s) {
  require_aligned(p);
  if (p.dtype == Dtype::bf16) launch_persistent_as<__nv_bfloat16>(p, s);
  else launch_persistent_as<__half>(p, s);
}

}  // namespace lesson08
