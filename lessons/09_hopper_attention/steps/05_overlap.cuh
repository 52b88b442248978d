// Lesson 09, step 5: the softmax under the tensor cores. In step 4 a consumer group waits for each
// GEMM before its softmax and for the softmax before the next GEMM. Here it issues S = Q·Kᵀ of tile
// j and O += P·V of tile j-1 together and waits only for the first, so tile j's softmax could run while P·V does
// (in the SASS it does not: ptxas waits for P·V first, NOTES.md); O is rescaled after that GEMM
// (softmax_deferred and rescale_o are in parts.cuh, since step 6 keeps them). Needs sm_90a.
#pragma once
#include <cstdint>

#include "lessons/09_hopper_attention/parts.cuh"

namespace lesson09 {

// Step 5: step 4 with the consumer loop software-pipelined by one GEMM.
template <int D, bool kCausal, class Softmax = DeferredSoftmax>
__global__ void __launch_bounds__(kWsThreads, 1) flash_overlap(Problem p, const __grid_constant__ TmaMaps maps) {
  using L = WsSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = aligned_smem(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  auto* empty = reinterpret_cast<std::uint64_t*>(smem + L::kEmpty);
  std::int64_t head64;
  int q0;
  lesson07::flash_block(p, kWgmmaBr, head64, q0);
  const int head = static_cast<int>(head64);
  const int nk = lesson07::key_tiles(p, q0, kWgmmaBr);
  init_ws_barriers(full, empty);
  if (threadIdx.x < 128) {
    kl::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) produce<D>(smem, maps, q0, head, nk);
    return;
  }
  kl::setmaxnreg_inc<kConsumerRegs>();
  const int group = threadIdx.x / 128 - 1, w = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4,
            t = lane % 4;
  const unsigned char* qs = smem + L::kQ + group * L::kTile;
  kl::mbarrier_wait(full + kTmaStages, 0);
  const int row = q0 + 64 * group + 16 * w + g, first_row = q0 + 64 * group;
  // This group's key tiles: all of them, or up to its own diagonal when causal (then it only releases the rest).
  const int mine = kCausal ? min(nk, (first_row + 64 + kBc - 1) / kBc) : nk;
  const float c = p.scale * kl::kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0}, alpha[2];
  float o[D / 2] = {};
  std::uint32_t pa[kBc / 16][4];
  auto needs_mask = [&](int k0) { return k0 + kBc > p.seq || (kCausal && k0 + kBc - 1 > first_row); };

  kl::mbarrier_wait(full, 0);  // tile 0: S, softmax (O is still zero: no rescale)
  {
    float s[32];
    kl::wgmma_fence();
    scores_wgmma<D>(s, qs, smem + L::kK);
    kl::wgmma_commit();
    kl::wgmma_wait<0>();
    if (needs_mask(0)) mask_scores_wgmma<kCausal>(s, 0, row, t, p.seq);
    Softmax::apply(s, m, l, alpha, c);
    pack_p(pa, s);
  }
  for (int kt = 1; kt < mine; ++kt) {
    const int stage = kt % kTmaStages, prev = (kt - 1) % kTmaStages;
    kl::mbarrier_wait(full + stage, (kt / kTmaStages) % 2);
    float s[32];
    kl::wgmma_fence();
    scores_wgmma<D>(s, qs, smem + L::kK + stage * L::kTile);  // S of tile kt ...
    kl::wgmma_commit();
    accumulate_pv_wgmma<D>(o, pa, smem + L::kV + prev * L::kTile);  // ... and P·V of tile kt - 1
    kl::wgmma_commit();
    kl::wgmma_wait<1>();  // S is ready; P·V may still run
    if (needs_mask(kt * kBc)) mask_scores_wgmma<kCausal>(s, kt * kBc, row, t, p.seq);
    Softmax::apply(s, m, l, alpha, c);
    kl::wgmma_wait<0>();  // P·V of tile kt - 1 is done: its stage is free, O may be rescaled
    kl::mbarrier_arrive(empty + prev);
    rescale_o<D>(o, alpha);
    pack_p(pa, s);
  }
  kl::wgmma_fence();
  accumulate_pv_wgmma<D>(o, pa, smem + L::kV + (mine - 1) % kTmaStages * L::kTile);
  kl::wgmma_commit();
  kl::wgmma_wait<0>();
  kl::mbarrier_arrive(empty + (mine - 1) % kTmaStages);
  for (int kt = mine; kt < nk; ++kt) {  // tiles past this group's diagonal: only released
    kl::mbarrier_wait(full + kt % kTmaStages, (kt / kTmaStages) % 2);
    kl::mbarrier_arrive(empty + kt % kTmaStages);
  }
  store_output_wgmma<D>(p.o + head64 * p.seq * D, o, l, row, t, p.seq);
}

// One kernel instance per head dimension and causality, as lesson 07's steps.
template <int D, bool kCausal>
void launch_overlap_as(const Problem& p, cudaStream_t s) {
  launch_flash<flash_overlap<D, kCausal>>(flash_ws_smem<D>(), kWsThreads, p, s, tma_maps(p));
}

inline void launch_overlap(const Problem& p, lesson07::Workspace&, cudaStream_t s) {
  with_dim_causal(p,
                  [&](auto d, auto causal) { launch_overlap_as<decltype(d)::value, decltype(causal)::value>(p, s); });
}

}  // namespace lesson09
