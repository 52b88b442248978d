// Lesson 09, step 7 (sm_90a): one block per SM, walking query tiles until none is left. Step 6's blocks pay
// a prologue (barriers, Q's load, the first K/V tile's latency) and an epilogue (O's store) with nothing else
// on their SM; here the producer loads the next tile's Q, K and V while the groups finish P·V and store O.
// Tiles come from a counter all blocks draw from, in step 6's order, so blocks share unequal causal tiles.
#pragma once
#include <cstdint>

#include "lessons/09_hopper_attention/parts.cuh"

namespace lesson09 {

// Step 6's kernel in a loop over the tiles its producer (produce_persistent, parts.cuh) draws: flash_tile's
// order, each head's tiles, the longest causal first. Q waits for every group's last S of the tile before;
// the tile's number comes with Q's barrier.
template <int D, bool kCausal>
__global__ void __launch_bounds__(WideSmem<D>::kThreads, 1)
    flash_persistent(Problem p, const __grid_constant__ TmaMaps maps) {
  using L = PersistentSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = aligned_smem(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  auto* empty = reinterpret_cast<std::uint64_t*>(smem + L::kEmpty);
  auto* q_empty = reinterpret_cast<std::uint64_t*>(smem + L::kQEmpty);
  volatile unsigned* tile_no = reinterpret_cast<unsigned*>(smem + L::kTileNo);
  const int all = (p.seq + kWideBc - 1) / kWideBc;
  const unsigned tiles = (p.seq + L::kBr - 1) / L::kBr * static_cast<unsigned>(p.heads_total());  // < 2^31
  if (threadIdx.x == 0) kl::mbarrier_init(q_empty, L::kGroups * 128);
  init_ws_barriers<kWideStages, L::kGroups>(full, empty);
  if (threadIdx.x < 128) {
    kl::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) produce_persistent<D, kCausal>(smem, p, maps, tiles, all);
    return;
  }
  kl::setmaxnreg_inc<L::kConsumerRegs>();
  int it = 0;  // key tiles consumed before this query tile
  const int group = threadIdx.x / 128 - 1, w = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4,
            t = lane % 4;
  const unsigned char* qs = smem + L::kQ + group * L::kQTile;
  const float c = p.scale * kl::kLog2e;
  for (int n = 0;; ++n) {
    kl::mbarrier_wait(full + kWideStages, n % 2);
    const unsigned tile = *tile_no;
    if (tile >= tiles) return;
    std::int64_t head64;
    int q0;
    lesson07::flash_tile(p, L::kBr, tile, head64, q0);
    const int nk = persistent_key_tiles<D, kCausal>(q0, all);
    auto stage = [&](int kt) { return (it + kt) % kWideStages; };
    auto phase = [&](int kt) { return (it + kt) / kWideStages % 2; };
    const int row = q0 + 64 * group + 16 * w + g, first_row = q0 + 64 * group;
    const int mine = kCausal ? min(nk, (first_row + 64 + kWideBc - 1) / kWideBc) : nk;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0}, alpha[2];
    float o[D / 2] = {};
    std::uint32_t pa[kWideBc / 16][4];
    auto needs_mask = [&](int k0) { return k0 + kWideBc > p.seq || (kCausal && k0 + kWideBc - 1 > first_row); };

    kl::mbarrier_wait(full + stage(0), phase(0));  // tile 0: S, softmax (O is still zero: no rescale)
    {
      float s[kWideBc / 2];
      kl::wgmma_fence();
      scores_wgmma<D>(s, qs, smem + L::kK + stage(0) * L::kTile);
      kl::wgmma_commit();
      kl::wgmma_wait<0>();
      if (needs_mask(0)) mask_scores_wgmma<kCausal>(s, 0, row, t, p.seq);
      softmax_deferred(s, m, l, alpha, c);
      pack_p(pa, s);
    }
    for (int kt = 1; kt < mine; ++kt) {
      kl::mbarrier_wait(full + stage(kt), phase(kt));
      float s[kWideBc / 2];
      kl::wgmma_fence();
      scores_wgmma<D>(s, qs, smem + L::kK + stage(kt) * L::kTile);  // S of tile kt ...
      kl::wgmma_commit();
      accumulate_pv_wgmma<D>(o, pa, smem + L::kV + stage(kt - 1) * L::kTile);  // ... and P·V of tile kt - 1
      kl::wgmma_commit();
      kl::wgmma_wait<1>();
      if (needs_mask(kt * kWideBc)) mask_scores_wgmma<kCausal>(s, kt * kWideBc, row, t, p.seq);
      softmax_deferred(s, m, l, alpha, c);
      kl::wgmma_wait<0>();
      kl::mbarrier_arrive(empty + stage(kt - 1));
      rescale_o<D>(o, alpha);
      pack_p(pa, s);
    }
    kl::mbarrier_arrive(q_empty);  // every S of this tile is done: the producer may load the next Q
    kl::wgmma_fence();
    accumulate_pv_wgmma<D>(o, pa, smem + L::kV + stage(mine - 1) * L::kTile);
    kl::wgmma_commit();
    kl::wgmma_wait<0>();
    kl::mbarrier_arrive(empty + stage(mine - 1));
    for (int kt = mine; kt < nk; ++kt) {  // tiles past this group's diagonal: only released
      kl::mbarrier_wait(full + stage(kt), phase(kt));
      kl::mbarrier_arrive(empty + stage(kt));
    }
    store_output_wgmma<D>(p.o + head64 * p.seq * D, o, l, row, t, p.seq);  // under the next tile's loads
    it += nk;
  }
}

inline void launch_persistent(const Problem& p, lesson07::Workspace&, cudaStream_t s) {
  with_dim_causal(p, [&](auto d, auto causal) {
    constexpr int kD = decltype(d)::value;
    launch_persistent_grid<flash_persistent<kD, decltype(causal)::value>, kD>(p, s);
  });
}

}  // namespace lesson09
