// Lesson 08, step 8: the epilogue through shared memory and a TMA store. Step 7's consumers store D from
// their registers: each warp writes 4 bytes a thread, 16 bytes of each of 8 rows per instruction, and
// the warpgroup waits for those stores before it may start the next tile. Here a consumer writes its
// finished values (bias and activation applied) into 16 KiB of shared memory, 64 rows x 128 columns at a
// time, in the swizzled layout, and one thread hands the copy engine whole 64 x 64 boxes, clipped to
// D's edges: full 128-byte rows go to L2, asynchronously. gemm() runs this step on sm_90. Needs sm_90a.
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/hopper_parts.cuh"

namespace lesson08 {

constexpr int kW8Bm = 128, kW8Bn = 256, kW8Stages = 4, kW8Threads = 384;
constexpr int kW8Staging = 64 * 128 * 2;  // a consumer's half of its 64 x 256 part of D, as two 64 x 64 boxes
constexpr int kW8Smem = 1024 + kW8Stages * stage_bytes<kW8Bm, kW8Bn>() + 2 * kW8Staging + 16 * kW8Stages;

template <class T>
__global__ void __launch_bounds__(kW8Threads, 1)
    gemm_tma_store(Problem p, TileOrder pairs, const __grid_constant__ GemmMaps maps,
                   const __grid_constant__ CUtensorMap d_map) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stages = align_1024(smem_raw);
  unsigned char* staging = stages + kW8Stages * stage_bytes<kW8Bm, kW8Bn>();  // one kW8Staging per consumer
  auto* full = reinterpret_cast<std::uint64_t*>(staging + 2 * kW8Staging);
  std::uint64_t* empty = full + kW8Stages;
  auto stage = [&](int it) { return stages + (it % kW8Stages) * stage_bytes<kW8Bm, kW8Bn>(); };
  const int rank = static_cast<int>(kl::cluster_rank()), cluster = blockIdx.x / 2, clusters = gridDim.x / 2;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kW8Stages; ++s) {
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
          kl::mbarrier_wait(empty + it % kW8Stages, (it / kW8Stages + 1) % 2);
          load_k_tile_pair<kW8Bm, kW8Bn>(stage(it), maps, full + it % kW8Stages, (2 * tm + rank) * kW8Bm, tn * kW8Bn,
                                         kt, rank);
        }
      }
    }
  } else {
    kl::setmaxnreg_inc<kConsumerRegs>();
    const int rows = 64 * (group - 1);
    int it = 0;
    float acc[kW8Bn / 2];
    for (int t = cluster; t < pairs.count(); t += clusters) {
      int tm, tn;
      pairs.tile(t, tm, tn);
      for (int kt = 0; kt < kts; ++kt, ++it) {
        kl::mbarrier_wait(full + it % kW8Stages, (it / kW8Stages) % 2);
        kl::wgmma_fence();
        wgmma_k_tile<kW8Bn, T>(acc, stage(it) + rows * 128, stage(it) + kW8Bm * 128, kt > 0);
        kl::wgmma_commit();
        kl::wgmma_wait<0>();
        if (threadIdx.x % 32 == 0) {
          kl::mbarrier_arrive(empty + it % kW8Stages);
          kl::mbarrier_arrive_cluster(empty + it % kW8Stages, rank ^ 1);
        }
      }
      const int row0 = (2 * tm + rank) * kW8Bm + rows;
      unsigned char* mine = staging + (group - 1) * kW8Staging;
#pragma unroll
      for (int h = 0; h < kW8Bn / 128; ++h) {
        if (threadIdx.x % 128 == 0) kl::bulk_wait_group_read<0>();  // the copy engine has read the last half
        kl::named_barrier(group, 128);
        stage_acc_fused<kW8Bn, T>(p, acc, mine, h, row0, tn * kW8Bn);
        kl::fence_proxy_async();  // ordinary stores, read next by the copy engine
        kl::named_barrier(group, 128);
        if (threadIdx.x % 128 == 0) {
          kl::tma_store_2d(&d_map, tn * kW8Bn + 128 * h, row0, mine);
          kl::tma_store_2d(&d_map, tn * kW8Bn + 128 * h + 64, row0, mine + 8192);
          kl::bulk_commit_group();
        }
      }
    }
    if (threadIdx.x % 128 == 0) kl::bulk_wait_group<0>();  // D is written before the block ends
  }
  kl::cluster_sync();  // neither block leaves while its partner may still arrive on its barriers
}

// Clusters of two blocks, as many as fit at once (launch_pair_clusters).
template <class T>
void launch_tma_store_as(const Problem& p, cudaStream_t s) {
  const int tiles_m = (p.m + kW8Bm - 1) / kW8Bm;
  const TileOrder pairs{(tiles_m + 1) / 2, (p.n + kW8Bn - 1) / kW8Bn};
  launch_pair_clusters<gemm_tma_store<T>>(kW8Threads, kW8Smem, pairs, s, p, pairs, gemm_maps(p, kW8Bm), d_map(p));
}

inline void launch_tma_store(const Problem& p, cudaStream_t s) {
  require_aligned(p);
  if (p.dtype == Dtype::bf16) launch_tma_store_as<__nv_bfloat16>(p, s);
  else launch_tma_store_as<__half>(p, s);
}

}  // namespace lesson08
