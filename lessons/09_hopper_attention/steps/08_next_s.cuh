// Lesson 09, step 8 (sm_90a): step 7 with the next query tile's first S = Q·Kᵀ issued before this tile's O
// is stored. In step 7 a tile's first S runs alone: nothing else is in flight for the group until it is done
// and its softmax has run. Here, if the next tile's Q has landed by the end of this tile, its first S is
// issued then and O's store (shuffles and global stores, no tensor core) runs while it computes; if not, the
// store comes first, as in step 7, rather than waiting for Q with the store held back.
#pragma once
#include <cstdint>

#include "lessons/09_hopper_attention/parts.cuh"

namespace lesson09 {

// Step 7's kernel (its producer, shared memory and tile order), with the groups' loop turned so that a tile
// ends by issuing the next tile's first S, then storing its own O, when the next tile's Q is already in.
template <int D, bool kCausal>
__global__ void __launch_bounds__(WideSmem<D>::kThreads, 1)
    flash_next_s(Problem p, const __grid_constant__ TmaMaps maps) {
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
  // The tile in hand: its head and first row, its key tiles, this thread's row, the group's key tiles.
  std::int64_t head64 = 0;
  int q0 = 0, nk = 0, row = 0, first_row = 0, mine = 0;
  float s[kWideBc / 2];  // S of a key tile; the first one's is issued by the tile before
  auto stage = [&](int kt) { return (it + kt) % kWideStages; };
  auto phase = [&](int kt) { return (it + kt) / kWideStages % 2; };
  auto needs_mask = [&](int k0) { return k0 + kWideBc > p.seq || (kCausal && k0 + kWideBc - 1 > first_row); };
  // Waits for tile n's Q and takes the tile's number: false once no tile is left.
  auto take_tile = [&](int n) {
    kl::mbarrier_wait(full + kWideStages, n % 2);
    const unsigned tile = *tile_no;
    if (tile >= tiles) return false;
    lesson07::flash_tile(p, L::kBr, tile, head64, q0);
    nk = persistent_key_tiles<D, kCausal>(q0, all);
    row = q0 + 64 * group + 16 * w + g;
    first_row = q0 + 64 * group;
    mine = kCausal ? min(nk, (first_row + 64 + kWideBc - 1) / kWideBc) : nk;
    return true;
  };
  auto issue_first_s = [&] {  // S of the tile's first key tile, not waited for
    kl::mbarrier_wait(full + stage(0), phase(0));
    kl::wgmma_fence();
    scores_wgmma<D>(s, qs, smem + L::kK + stage(0) * L::kTile);
    kl::wgmma_commit();
  };

  if (!take_tile(0)) return;
  issue_first_s();
  for (int n = 0;; ++n) {
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0}, alpha[2];
    float o[D / 2] = {};
    std::uint32_t pa[kWideBc / 16][4];
    kl::wgmma_wait<0>();  // tile 0's S: softmax (O is still zero: no rescale)
    if (needs_mask(0)) mask_scores_wgmma<kCausal>(s, 0, row, t, p.seq);
    softmax_deferred(s, m, l, alpha, c);
    pack_p(pa, s);
    for (int kt = 1; kt < mine; ++kt) {
      kl::mbarrier_wait(full + stage(kt), phase(kt));
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
    __half* const o_head = p.o + head64 * p.seq * D;
    const int o_row = row;
    it += nk;
    // The next Q is in, as every thread of the group saw it: each path issues wgmma, which every thread of the
    // warpgroup must execute as the same instruction, so the group decides as one (named barrier 1 + group).
    if (kl::named_barrier_all(1 + group, 128, kl::mbarrier_ready(full + kWideStages, (n + 1) % 2))) {
      if (!take_tile(n + 1)) {
        store_output_wgmma<D>(o_head, o, l, o_row, t, p.seq);
        return;
      }
      issue_first_s();                                       // the next tile's first S ...
      store_output_wgmma<D>(o_head, o, l, o_row, t, p.seq);  // ... under this tile's store
    } else {
      store_output_wgmma<D>(o_head, o, l, o_row, t, p.seq);  // step 7's order: Q is not there yet
      if (!take_tile(n + 1)) return;
      issue_first_s();
    }
  }
}

inline void launch_next_s(const Problem& p, lesson07::Workspace&, cudaStream_t s) {
  with_dim_causal(p, [&](auto d, auto causal) {
    constexpr int kD = decltype(d)::value;
    launch_persistent_grid<flash_next_s<kD, decltype(causal)::value>, kD>(p, s);
  });
}

}  // namespace lesson09
