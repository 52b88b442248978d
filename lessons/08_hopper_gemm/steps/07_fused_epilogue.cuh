// Lesson 08, step 7: the fused epilogue. Step 6 stores α·A·B + β·C, and a bias and an activation then
// take a second kernel that reads and writes D again (2 · M · N · 2 bytes: ~0.1 ms at 8192² on an
// H100). Here the consumers add the column's bias and apply the activation (tanh.approx: one
// special-function instruction) to the accumulators before the one store: the epilogue costs arithmetic
// on registers and no memory traffic. Needs sm_90a.
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/hopper_parts.cuh"

namespace lesson08 {

constexpr int kW7Bm = 128, kW7Bn = 256, kW7Stages = 4, kW7Threads = 384;
constexpr int kW7Smem = 1024 + kW7Stages * stage_bytes<kW7Bm, kW7Bn>() + 16 * kW7Stages;

template <class T>
__global__ void __launch_bounds__(kW7Threads, 1)
    gemm_fused_epilogue(Problem p, TileOrder pairs, const __grid_constant__ GemmMaps maps) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stages = align_1024(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(stages + kW7Stages * stage_bytes<kW7Bm, kW7Bn>());
  std::uint64_t* empty = full + kW7Stages;
  auto stage = [&](int it) { return stages + (it % kW7Stages) * stage_bytes<kW7Bm, kW7Bn>(); };
  const int rank = static_cast<int>(kl::cluster_rank()), cluster = blockIdx.x / 2, clusters = gridDim.x / 2;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kW7Stages; ++s) {
      kl::mbarrier_init(full + s, 1);
      kl::mbarrier_init(empty + s, 16);  // every consumer warp of both blocks
    }
    kl::mbarrier_init_fence();
  }
  kl::cluster_sync();  // both blocks' barriers exist before either multicasts or arrives remotely
  const int kts = (p.k + kBk - 1) / kBk, group = threadIdx.x / 128;

  // Pair t of the grouped order covers tile rows 2·tm and 2·tm + 1 of column tn; this block takes one.
  if (group == 0) {
    kl::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = cluster; t < pairs.count(); t += clusters) {
        int tm, tn;
        pairs.tile(t, tm, tn);
        for (int kt = 0; kt < kts; ++kt, ++it) {
          kl::mbarrier_wait(empty + it % kW7Stages, (it / kW7Stages + 1) % 2);
          load_k_tile_pair<kW7Bm, kW7Bn>(stage(it), maps, full + it % kW7Stages, (2 * tm + rank) * kW7Bm, tn * kW7Bn,
                                         kt, rank);
        }
      }
    }
  } else {
    kl::setmaxnreg_inc<kConsumerRegs>();
    const int rows = 64 * (group - 1);
    int it = 0;
    float acc[kW7Bn / 2];
    for (int t = cluster; t < pairs.count(); t += clusters) {
      int tm, tn;
      pairs.tile(t, tm, tn);
      for (int kt = 0; kt < kts; ++kt, ++it) {
        kl::mbarrier_wait(full + it % kW7Stages, (it / kW7Stages) % 2);
        kl::wgmma_fence();
        wgmma_k_tile<kW7Bn, T>(acc, stage(it) + rows * 128, stage(it) + kW7Bm * 128, kt > 0);
        kl::wgmma_commit();
        kl::wgmma_wait<0>();
        if (threadIdx.x % 32 == 0) {
          kl::mbarrier_arrive(empty + it % kW7Stages);
          kl::mbarrier_arrive_cluster(empty + it % kW7Stages, rank ^ 1);
        }
      }
      store_acc<kW7Bn, T, true>(p, acc, (2 * tm + rank) * kW7Bm + rows, tn * kW7Bn);
    }
  }
  kl::cluster_sync();  // neither block leaves while its partner may still arrive on its barriers
}

// Clusters of two blocks, as many as fit at once (launch_pair_clusters).
template <class T>
void launch_fused_epilogue_as(const Problem& p, cudaStream_t s) {
  const int tiles_m = (p.m + kW7Bm - 1) / kW7Bm;
  const TileOrder pairs{(tiles_m + 1) / 2, (p.n + kW7Bn - 1) / kW7Bn};
  launch_pair_clusters<gemm_fused_epilogue<T>>(kW7Threads, kW7Smem, pairs, s, p, pairs, gemm_maps(p, kW7Bm));
}

inline void launch_fused_epilogue(const Problem& p, cudaStream_t s) {
  require_aligned(p);
  if (p.dtype == Dtype::bf16) launch_fused_epilogue_as<__nv_bfloat16>(p, s);
  else launch_fused_epilogue_as<__half>(p, s);
}

}  // namespace lesson08
