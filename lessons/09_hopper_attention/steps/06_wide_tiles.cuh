// Lesson 09, step 6: key tiles of 128. Per tile of step 5's 64 keys a group waits on a barrier,
// issues D/16 + 4 wgmmas, reduces its rows across a quad and commits; with 128 keys, S = Q·Kᵀ is one
// m64n128 wgmma per 16 columns of D and P·V 8 k-steps, so every fixed cost of a tile is paid once per
// 128 keys, for S in 64 registers a thread instead of 32. Three stages of K and V (64 KiB each at
// D = 128: 224 KiB of 227 with Q; two were too few, NOTES.md). Needs sm_90a.
#pragma once
#include <cstdint>

#include "lessons/09_hopper_attention/parts.cuh"

namespace lesson09 {

// Step 5's kernel on 128-key tiles, with L::kGroups consumer groups.
template <int D, bool kCausal>
__global__ void __launch_bounds__(WideSmem<D>::kThreads, 1)
    flash_wide(Problem p, const __grid_constant__ TmaMaps maps) {
  using L = WideSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = aligned_smem(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  auto* empty = reinterpret_cast<std::uint64_t*>(smem + L::kEmpty);
  std::int64_t head64;
  int q0;
  lesson07::flash_block(p, L::kBr, head64, q0);
  const int head = static_cast<int>(head64);
  const int all = (p.seq + kWideBc - 1) / kWideBc;
  const int nk = kCausal ? min(all, (q0 + L::kBr + kWideBc - 1) / kWideBc) : all;
  init_ws_barriers<kWideStages, L::kGroups>(full, empty);
  if (threadIdx.x < 128) {
    kl::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) produce_wide<D>(smem, maps, q0, head, nk);
    return;
  }
  kl::setmaxnreg_inc<L::kConsumerRegs>();
  const int group = threadIdx.x / 128 - 1, w = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4,
            t = lane % 4;
  const unsigned char* qs = smem + L::kQ + group * L::kQTile;
  kl::mbarrier_wait(full + kWideStages, 0);
  const int row = q0 + 64 * group + 16 * w + g, first_row = q0 + 64 * group;
  const int mine = kCausal ? min(nk, (first_row + 64 + kWideBc - 1) / kWideBc) : nk;
  const float c = p.scale * kl::kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0}, alpha[2];
  float o[D / 2] = {};
  std::uint32_t pa[kWideBc / 16][4];
  auto needs_mask = [&](int k0) { return k0 + kWideBc > p.seq || (kCausal && k0 + kWideBc - 1 > first_row); };

  kl::mbarrier_wait(full, 0);  // tile 0: S, softmax (O is still zero: no rescale)
  {
    float s[kWideBc / 2];
    kl::wgmma_fence();
    scores_wgmma<D>(s, qs, smem + L::kK);
    kl::wgmma_commit();
    kl::wgmma_wait<0>();
    if (needs_mask(0)) mask_scores_wgmma<kCausal>(s, 0, row, t, p.seq);
    softmax_deferred(s, m, l, alpha, c);
    pack_p(pa, s);
  }
  for (int kt = 1; kt < mine; ++kt) {
    const int stage = kt % kWideStages, prev = (kt - 1) % kWideStages;
    kl::mbarrier_wait(full + stage, (kt / kWideStages) % 2);
    float s[kWideBc / 2];
    kl::wgmma_fence();
    scores_wgmma<D>(s, qs, smem + L::kK + stage * L::kTile);  // S of tile kt ...
    kl::wgmma_commit();
    accumulate_pv_wgmma<D>(o, pa, smem + L::kV + prev * L::kTile);  // ... and P·V of tile kt - 1
    kl::wgmma_commit();
    kl::wgmma_wait<1>();
    if (needs_mask(kt * kWideBc)) mask_scores_wgmma<kCausal>(s, kt * kWideBc, row, t, p.seq);
    softmax_deferred(s, m, l, alpha, c);
    kl::wgmma_wait<0>();
    kl::mbarrier_arrive(empty + prev);
    rescale_o<D>(o, alpha);
    pack_p(pa, s);
  }
  kl::wgmma_fence();
  accumulate_pv_wgmma<D>(o, pa, smem + L::kV + (mine - 1) % kWideStages * L::kTile);
  kl::wgmma_commit();
  kl::wgmma_wait<0>();
  kl::mbarrier_arrive(empty + (mine - 1) % kWideStages);
  for (int kt = mine; kt < nk; ++kt) {  // tiles past this group's diagonal: only released
    kl::mbarrier_wait(full + kt % kWideStages, (kt / kWideStages) % 2);
    kl::mbarrier_arrive(empty + kt % kWideStages);
  }
  store_output_wgmma<D>(p.o + head64 * p.seq * D, o, l, row, t, p.seq);
}

template <int D, bool kCausal>
void launch_wide_as(const Problem& p, cudaStream_t s) {
  launch_flash_rows<flash_wide<D, kCausal>>(WideSmem<D>::kBr, WideSmem<D>::kBytes + 1024, WideSmem<D>::kThreads, p, s,
                                            wide_tma_maps(p));
}

inline void launch_wide_tiles(const Problem& p, lesson07::Workspace&, cudaStream_t s) {
  with_dim_causal(p, [&](auto d, auto causal) { launch_wide_as<decltype(d)::value, decltype(causal)::value>(p, s); });
}

}  // namespace lesson09
