// Lesson 09, step 4: producer and consumers. A third warpgroup only feeds the copy engine: it waits
// until both consumer groups have released a stage (an "empty" mbarrier) and refills it, so the
// block's barrier between tiles is gone and each consumer group runs at its own pace. setmaxnreg
// hands the producer's registers to the consumers. Needs sm_90a.
#pragma once
#include <cstdint>

#include "lessons/09_hopper_attention/steps/03_tma.cuh"

namespace lesson09 {

// Producer warpgroup 0, consumer warpgroups 1 and 2 (64 query rows each, as in steps 2-3).
constexpr int kWsThreads = 128 * (1 + kWgmmaGroups);

// setmaxnreg: this warpgroup's registers per thread become N (a multiple of 8; the kernel's cap at
// entry is 65536 / kWsThreads). The producer gives registers back, the consumers take them.
template <int N>
__device__ __forceinline__ void regs_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// setmaxnreg.inc only takes registers that setmaxnreg.dec released in the same block. One block a SM
// (384 threads enter with 168 registers): the producer drops to 24, the consumers grow to 240 (O alone
// is 64 a thread at D = 128). Two blocks a SM at D = 64 would leave the consumers 104 registers, too
// few for the wgmma chains (ptxas serialises them and spills), so steps 4-5 run one block a SM.
constexpr int kProducerRegs = 24, kConsumerRegs = 240;

// Step 3's shared memory, then one "empty" barrier per stage: every consumer thread arrives on it
// when its group is done with the stage's K and V.
template <int D>
struct WsSmem : TmaSmem<D> {
  static constexpr int kEmpty = TmaSmem<D>::kBytes, kBytes = kEmpty + 8 * kTmaStages;
};

// The producer (one thread): Q once, then every key tile into stage t % kTmaStages as soon as the
// consumers have emptied it (a fresh barrier counts as emptied: the wait on the parity before its
// first phase returns at once).
template <int D>
__device__ __forceinline__ void produce(unsigned char* smem, const TmaMaps& maps, int q0, int head, int nk) {
  using L = WsSmem<D>;
  auto* full = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  auto* empty = reinterpret_cast<std::uint64_t*>(smem + L::kEmpty);
  kl::mbarrier_arrive_expect_tx(full + kTmaStages, kWgmmaGroups * L::kTile);
  for (int gr = 0; gr < kWgmmaGroups; ++gr)
    for (int pn = 0; pn < L::kPanels; ++pn)
      kl::tma_load_3d(smem + L::kQ + gr * L::kTile + pn * L::kPanelBytes, &maps.q, 64 * pn, q0 + 64 * gr, head,
                      full + kTmaStages);
  for (int t = 0; t < nk; ++t) {
    kl::mbarrier_wait(empty + t % kTmaStages, (t / kTmaStages + 1) % 2);
    issue_kv_tile<D>(smem, maps, t, head);
  }
}

// Step 4: the consumers run step 3's tile loop without the block barrier: wait for the stage to be
// full, compute, and release it (every thread arrives on the stage's empty barrier).
template <int D, bool kCausal>
__global__ void __launch_bounds__(kWsThreads, 1) flash_ws(Problem p, const __grid_constant__ TmaMaps maps) {
  using L = WsSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t{1023});
  auto* full = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  auto* empty = reinterpret_cast<std::uint64_t*>(smem + L::kEmpty);
  std::int64_t head64;
  int q0;
  lesson07::flash_block(p, kWgmmaBr, head64, q0);
  const int head = static_cast<int>(head64);
  const int nk = lesson07::key_tiles(p, q0, kWgmmaBr);
  if (threadIdx.x == 0) {
    for (int s = 0; s <= kTmaStages; ++s) kl::mbarrier_init(full + s, 1);
    for (int s = 0; s < kTmaStages; ++s) kl::mbarrier_init(empty + s, kWgmmaGroups * 128);
    kl::mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialised before anyone uses them
  if (threadIdx.x < 128) {
    regs_decrease<kProducerRegs>();
    if (threadIdx.x == 0) produce<D>(smem, maps, q0, head, nk);
    return;
  }
  regs_increase<kConsumerRegs>();
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

template <int D>
constexpr std::size_t flash_ws_smem() {
  return WsSmem<D>::kBytes + 1024;
}

template <int D, bool kCausal>
struct WsLaunch {
  static void run(const Problem& p, cudaStream_t s) {
    launch_flash<flash_ws<D, kCausal>>(flash_ws_smem<D>(), kWsThreads, p, s, tma_maps(p));
  }
};

inline void launch_warp_specialized(const Problem& p, lesson07::Workspace&, cudaStream_t s) {
  by_shape<WsLaunch>(p, s);
}

}  // namespace lesson09
