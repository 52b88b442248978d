// Lesson 08, step 6: two blocks share B. A cluster of two blocks, on two SMs of one GPC, computes two
// 128 x 256 tiles one above the other: both need the same 64 x 256 k-tile of B. Each block's producer
// loads its own A box and half of B, and the copy engine multicasts that half into both blocks' shared
// memory, so L2 sends each B byte once for two blocks: per k-tile a block asks for 32 KiB instead of
// 48. A stage may be refilled only when the consumers of both blocks are done with it: every consumer
// warp arrives on its own block's "empty" barrier and on its partner's. Needs sm_90a.
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/hopper_parts.cuh"

namespace lesson08 {

constexpr int kW6Bm = 128, kW6Bn = 256, kW6Stages = 4, kW6Threads = 384;
constexpr int kW6Smem = 1024 + kW6Stages * stage_bytes<kW6Bm, kW6Bn>() + 16 * kW6Stages;

template <class T>
__global__ void __launch_bounds__(kW6Threads, 1)
    gemm_cluster(Problem p, TileOrder pairs, const __grid_constant__ GemmMaps maps) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stages = align_1024(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(stages + kW6Stages * stage_bytes<kW6Bm, kW6Bn>());
  std::uint64_t* empty = full + kW6Stages;
  auto stage = [&](int it) { return stages + (it % kW6Stages) * stage_bytes<kW6Bm, kW6Bn>(); };
  const int rank = static_cast<int>(kl::cluster_rank()), cluster = blockIdx.x / 2, clusters = gridDim.x / 2;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kW6Stages; ++s) {
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
          kl::mbarrier_wait(empty + it % kW6Stages, (it / kW6Stages + 1) % 2);
          load_k_tile_pair<kW6Bm, kW6Bn>(stage(it), maps, full + it % kW6Stages, (2 * tm + rank) * kW6Bm, tn * kW6Bn,
                                         kt, rank);
        }
      }
    }
  } else {
    kl::setmaxnreg_inc<kConsumerRegs>();
    const int rows = 64 * (group - 1);
    int it = 0;
    float acc[kW6Bn / 2];
    for (int t = cluster; t < pairs.count(); t += clusters) {
      int tm, tn;
      pairs.tile(t, tm, tn);
      for (int kt = 0; kt < kts; ++kt, ++it) {
        kl::mbarrier_wait(full + it % kW6Stages, (it / kW6Stages) % 2);
        kl::wgmma_fence();
        wgmma_k_tile<kW6Bn, T>(acc, stage(it) + rows * 128, stage(it) + kW6Bm * 128, kt > 0);
        kl::wgmma_commit();
        kl::wgmma_wait<0>();
        if (threadIdx.x % 32 == 0) {
          kl::mbarrier_arrive(empty + it % kW6Stages);
          kl::mbarrier_arrive_cluster(empty + it % kW6Stages, rank ^ 1);
        }
      }
      store_acc<kW6Bn, T>(p, acc, (2 * tm + rank) * kW6Bm + rows, tn * kW6Bn);
    }
  }
  kl::cluster_sync();  // neither block leaves while its partner may still arrive on its barriers
}

// Clusters of two blocks, as many as fit at once (launch_pair_clusters).
template <class T>
void launch_cluster_as(const Problem& p, cudaStream_t s) {
  const int tiles_m = (p.m + kW6Bm - 1) / kW6Bm;
  const TileOrder pairs{(tiles_m + 1) / 2, (p.n + kW6Bn - 1) / kW6Bn};
  launch_pair_clusters<gemm_cluster<T>>(kW6Threads, kW6Smem, pairs, s, p, pairs, gemm_maps(p, kW6Bm));
}

inline void launch_cluster(const Problem& p, cudaStream_t s) {
  require_aligned(p);
  if (p.dtype == Dtype::bf16) launch_cluster_as<__nv_bfloat16>(p, s);
  else launch_cluster_as<__half>(p, s);
}

}  // namespace lesson08
