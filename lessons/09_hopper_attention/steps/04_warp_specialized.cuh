// Lesson 09, step 4: producer and consumers. A third warpgroup only feeds the copy engine: it waits
// until both consumer groups have released a stage (an "empty" mbarrier) and refills it, so the
// block's barrier between tiles is gone and each consumer group runs at its own pace. setmaxnreg
// hands the producer's registers to the consumers. Needs sm_90a.
#pragma once
#include <cstdint>

#include "lessons/09_hopper_attention/parts.cuh"

namespace lesson09 {

// Step 4: the consumers run step 3's tile loop without the block barrier: wait for the stage to be
// full, compute, and release it (every thread arrives on the stage's empty barrier).
template <int D, bool kCausal>
__global__ void __launch_bounds__(kWsThreads, 1) flash_ws(Problem p, const __grid_constant__ TmaMaps maps) {
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
    kl::mbarrier_arrive(empty + stage);
  }
  store_output_wgmma<D>(p.o + head64 * p.seq * D, o, l, row, t, p.seq);
}

// One kernel instance per head dimension and causality, as lesson 07's steps.
template <int D, bool kCausal>
void launch_warp_specialized_as(const Problem& p, cudaStream_t s) {
  launch_flash<flash_ws<D, kCausal>>(flash_ws_smem<D>(), kWsThreads, p, s, tma_maps(p));
}

inline void launch_warp_specialized(const Problem& p, lesson07::Workspace&, cudaStream_t s) {
  with_dim_causal(
      p, [&](auto d, auto causal) { launch_warp_specialized_as<decltype(d)::value, decltype(causal)::value>(p, s); });
}

}  // namespace lesson09
