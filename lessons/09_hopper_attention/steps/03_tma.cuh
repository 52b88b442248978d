// Lesson 09, step 3: step 2 with its loads handed to the copy engine. One thread asks TMA for whole
// 64 x 64 boxes of Q (once), K and V (per key tile), which arrive already in the swizzled layout and
// zero-filled past the sequence's end, and are counted on one mbarrier per stage; three stages deep,
// so two key tiles are in flight while one is used. No thread computes an address or waits on a
// cp.async group any more. Needs sm_90a (lesson09_hopper target).
#pragma once
#include <cstdint>

#include "lessons/09_hopper_attention/parts.cuh"

namespace lesson09 {

// Step 3: thread 0 keeps kTmaStages key tiles requested ahead; everyone waits on the stage's barrier
// (its phase flips each time the stage is refilled), computes as step 2, and after the block's
// barrier thread 0 refills the stage just finished with the tile kTmaStages further on.
template <int D, bool kCausal>
__global__ void __launch_bounds__(kWgmmaGroups * 128, 1) flash_tma(Problem p, const __grid_constant__ TmaMaps maps) {
  using L = TmaSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = aligned_smem(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  auto* q_full = full + kTmaStages;
  const int group = threadIdx.x / 128, w = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  std::int64_t head64;
  int q0;
  lesson07::flash_block(p, kWgmmaBr, head64, q0);
  const int head = static_cast<int>(head64);
  const int nk = lesson07::key_tiles(p, q0, kWgmmaBr);
  if (threadIdx.x == 0) {
    for (int s = 0; s <= kTmaStages; ++s) kl::mbarrier_init(full + s, 1);
    kl::mbarrier_init_fence();
    kl::mbarrier_arrive_expect_tx(q_full, kWgmmaGroups * L::kTile);
    for (int gr = 0; gr < kWgmmaGroups; ++gr)
      for (int pn = 0; pn < L::kPanels; ++pn)
        kl::tma_load_3d(smem + L::kQ + gr * L::kTile + pn * L::kPanelBytes, &maps.q, 64 * pn, q0 + 64 * gr, head,
                        q_full);
    for (int kt = 0; kt < kTmaStages && kt < nk; ++kt) issue_kv_tile<D>(smem, maps, kt, head);
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them
  const unsigned char* qs = smem + L::kQ + group * L::kTile;
  kl::mbarrier_wait(q_full, 0);

  const int row = q0 + 64 * group + 16 * w + g, first_row = q0 + 64 * group;
  const float c = p.scale * kl::kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
  float o[D / 2] = {};
  for (int kt = 0; kt < nk; ++kt) {
    const int k0 = kt * kBc, stage = kt % kTmaStages;
    kl::mbarrier_wait(full + stage, (kt / kTmaStages) % 2);
    if (!kCausal || k0 <= first_row + 63) {
      float s[32];
      kl::wgmma_fence();
      scores_wgmma<D>(s, qs, smem + L::kK + stage * L::kTile);
      kl::wgmma_commit();
      kl::wgmma_wait<0>();
      if (k0 + kBc > p.seq || (kCausal && k0 + kBc - 1 > first_row)) mask_scores_wgmma<kCausal>(s, k0, row, t, p.seq);
      online_softmax_wgmma<D>(s, m, l, o, c);
      std::uint32_t pa[kBc / 16][4];
      pack_p(pa, s);
      kl::wgmma_fence();
      accumulate_pv_wgmma<D>(o, pa, smem + L::kV + stage * L::kTile);
      kl::wgmma_commit();
      kl::wgmma_wait<0>();
    }
    __syncthreads();  // both groups are done with this stage: it may be refilled
    if (threadIdx.x == 0 && kt + kTmaStages < nk) issue_kv_tile<D>(smem, maps, kt + kTmaStages, head);
  }
  store_output_wgmma<D>(p.o + head64 * p.seq * D, o, l, row, t, p.seq);
}

template <int D>
constexpr std::size_t flash_tma_smem() {
  return TmaSmem<D>::kBytes + 1024;
}

// One kernel instance per head dimension and causality, as lesson 07's steps.
template <int D, bool kCausal>
void launch_tma_as(const Problem& p, cudaStream_t s) {
  launch_flash<flash_tma<D, kCausal>>(flash_tma_smem<D>(), kWgmmaGroups * 128, p, s, tma_maps(p));
}

inline void launch_tma(const Problem& p, lesson07::Workspace&, cudaStream_t s) {
  with_dim_causal(p, [&](auto d, auto causal) { launch_tma_as<decltype(d)::value, decltype(causal)::value>(p, s); });
}

}  // namespace lesson09
