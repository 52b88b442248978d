// Lesson 08, step 4: producer and consumers. Three warpgroups: the first only feeds the copy engine, the
// other two each multiply 64 rows of a 128 x 256 tile (wgmma m64n256k16: twice the columns per
// instruction, so each B byte loaded feeds twice the math of step 3). Nobody waits for the whole block any
// more: a consumer waits on a stage's "full" barrier and, done with it, arrives on its "empty" barrier,
// on which the producer waits before refilling it. setmaxnreg hands the producer's registers to the
// consumers, whose accumulators alone take 128 a thread. Needs sm_90a (lesson08_hopper target).
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/hopper_parts.cuh"

namespace lesson08 {

constexpr int kW4Bm = 128, kW4Bn = 256, kW4Stages = 4, kW4Threads = 384;
constexpr int kW4Smem = 1024 + kW4Stages * stage_bytes<kW4Bm, kW4Bn>() + 16 * kW4Stages;

template <class T>
__global__ void __launch_bounds__(kW4Threads, 1)
    gemm_warp_specialized(Problem p, TileOrder order, const __grid_constant__ GemmMaps maps) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stages = align_1024(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(stages + kW4Stages * stage_bytes<kW4Bm, kW4Bn>());
  std::uint64_t* empty = full + kW4Stages;
  auto stage = [&](int kt) { return stages + (kt % kW4Stages) * stage_bytes<kW4Bm, kW4Bn>(); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kW4Stages; ++s) {
      kl::mbarrier_init(full + s, 1);   // the producer's arrival, plus the bytes
      kl::mbarrier_init(empty + s, 8);  // one arrival per consumer warp
    }
    kl::mbarrier_init_fence();
  }
  __syncthreads();
  int tm, tn;
  order.tile(blockIdx.x, tm, tn);
  const int m0 = tm * kW4Bm, n0 = tn * kW4Bn, kts = (p.k + kBk - 1) / kBk;
  const int group = threadIdx.x / 128;

  if (group == 0) {  // producer: one thread issues every load
    kl::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0)
      for (int kt = 0; kt < kts; ++kt) {
        // Round r = kt / stages of a stage waits for the consumers' release of round r - 1; round 0
        // waits for parity 1, which a fresh barrier counts as completed.
        kl::mbarrier_wait(empty + kt % kW4Stages, (kt / kW4Stages + 1) % 2);
        load_k_tile<kW4Bm, kW4Bn>(stage(kt), maps, full + kt % kW4Stages, m0, n0, kt);
      }
  } else {  // consumers: 64 rows each
    kl::setmaxnreg_inc<kConsumerRegs>();
    const int rows = 64 * (group - 1);
    float acc[kW4Bn / 2];
    for (int kt = 0; kt < kts; ++kt) {
      kl::mbarrier_wait(full + kt % kW4Stages, (kt / kW4Stages) % 2);
      kl::wgmma_fence();
      wgmma_k_tile<kW4Bn, T>(acc, stage(kt) + rows * 128, stage(kt) + kW4Bm * 128, kt > 0);
      kl::wgmma_commit();
      kl::wgmma_wait<0>();
      if (threadIdx.x % 32 == 0) kl::mbarrier_arrive(empty + kt % kW4Stages);
    }
    store_acc<kW4Bn, T>(p, acc, m0 + rows, n0);
  }
}

template <class T>
void launch_warp_specialized_as(const Problem& p, cudaStream_t s) {
  CUDA_CHECK(cudaFuncSetAttribute(gemm_warp_specialized<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kW4Smem));
  const TileOrder order{(p.m + kW4Bm - 1) / kW4Bm, (p.n + kW4Bn - 1) / kW4Bn};
  gemm_warp_specialized<T><<<order.count(), kW4Threads, kW4Smem, s>>>(p, order, gemm_maps(p, kW4Bm));
  CUDA_CHECK_LAUNCH();
}

inline void launch_warp_specialized(const Problem& p, cudaStream_t s) {
  require_aligned(p);
  if (p.dtype == Dtype::bf16) launch_warp_specialized_as<__nv_bfloat16>(p, s);
  else launch_warp_specialized_as<__half>(p, s);
}

}  // namespace lesson08
