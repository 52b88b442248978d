// Lesson 09, step 2: lesson 07's flash loop on wgmma. A warpgroup (4 warps) owns 64 query rows and
// computes S = Q·Kᵀ for a 64-key tile in one chain of m64n64k16 wgmmas reading Q and K from shared
// memory, then O += P·V with P straight from the S registers and V read from shared memory through
// the transpose bit: 4 (D = 64) or 8 (D = 128) tensor-core instructions per GEMM where mma.sync needs
// 64. K and V still stream in by cp.async, two stages. Needs sm_90a (lesson09_hopper target).
#pragma once
#include <cstdint>

#include "lessons/09_hopper_attention/parts.cuh"

namespace lesson09 {

// Shared memory of step 2, every piece a whole number of 1024-byte-aligned panels (8 KiB each:
// 64 rows x 64 f16): Q [groups][D/64 panels], then K and V, each [2 stages][D/64 panels].
template <int D>
struct WgmmaSmem {
  static constexpr int kPanels = D / kl::kPanelCols, kPanelBytes = 64 * kl::kRowBytes;
  static constexpr int kQ = 0, kK = kQ + kWgmmaGroups * kPanels * kPanelBytes, kV = kK + 2 * kPanels * kPanelBytes;
  static constexpr int kBytes = kV + 2 * kPanels * kPanelBytes;
};

// 64 rows [row0, row0 + 64) of a [seq, D] f16 matrix into panels at dst (128-byte swizzle), by 16-byte
// cp.async; rows past seq are zero-filled. The calling threads share the work (count = their number).
template <int D>
__device__ __forceinline__ void load_rows_async(unsigned char* dst, const __half* src, int row0, int seq, int tid,
                                                int count) {
  constexpr int kChunks = D / 8;  // 16-byte chunks a row
  for (int i = tid; i < 64 * kChunks; i += count) {
    const int r = i / kChunks, ch = i % kChunks;
    const bool ok = row0 + r < seq;
    const std::int64_t g = ok ? static_cast<std::int64_t>(row0 + r) * D + ch * 8 : 0;
    kl::cp_async16(reinterpret_cast<__half*>(dst + (ch / 8) * 64 * kl::kRowBytes + kl::swizzled(r, ch % 8)), src + g,
                   ok ? 16 : 0);
  }
}

// Step 2: per key tile, one barrier after the tile lands; each warpgroup issues its S chain, waits,
// runs the softmax on the accumulators, issues its P·V chain and waits; the next tile's cp.async is
// in flight meanwhile. A warpgroup whose rows are all above a causal key tile skips it.
template <int D, bool kCausal>
__global__ void __launch_bounds__(kWgmmaGroups * 128, 1) flash_wgmma(Problem p) {
  using L = WgmmaSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = aligned_smem(smem_raw);
  const int group = threadIdx.x / 128, w = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  std::int64_t head;
  int q0;
  lesson07::flash_block(p, kWgmmaBr, head, q0);
  const std::int64_t base = head * p.seq * D;
  const __half *k = p.k + base, *v = p.v + base;
  const int nk = lesson07::key_tiles(p, q0, kWgmmaBr);
  unsigned char* qs = smem + L::kQ + group * L::kPanels * L::kPanelBytes;
  load_rows_async<D>(qs, p.q + base, q0 + 64 * group, p.seq, threadIdx.x % 128, 128);
  load_rows_async<D>(smem + L::kK, k, 0, p.seq, threadIdx.x, blockDim.x);
  load_rows_async<D>(smem + L::kV, v, 0, p.seq, threadIdx.x, blockDim.x);
  kl::cp_async_commit();

  const int row = q0 + 64 * group + 16 * w + g, first_row = q0 + 64 * group;
  const float c = p.scale * kl::kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
  float o[D / 2] = {};
  for (int kt = 0; kt < nk; ++kt) {
    const int k0 = kt * kBc, stage = kt % 2;
    if (kt + 1 < nk) {
      const int next = (1 - stage) * L::kPanels * L::kPanelBytes;
      load_rows_async<D>(smem + L::kK + next, k, k0 + kBc, p.seq, threadIdx.x, blockDim.x);
      load_rows_async<D>(smem + L::kV + next, v, k0 + kBc, p.seq, threadIdx.x, blockDim.x);
      kl::cp_async_commit();
      kl::cp_async_wait<1>();
    } else {
      kl::cp_async_wait<0>();
    }
    kl::fence_proxy_async();  // the cp.async writes are read next by wgmma (the async proxy)
    __syncthreads();          // this stage's tile has landed for every thread
    if (!kCausal || k0 <= first_row + 63) {
      const unsigned char* ks = smem + L::kK + stage * L::kPanels * L::kPanelBytes;
      const unsigned char* vs = smem + L::kV + stage * L::kPanels * L::kPanelBytes;
      float s[32];
      kl::wgmma_fence();
      scores_wgmma<D>(s, qs, ks);
      kl::wgmma_commit();
      kl::wgmma_wait<0>();
      if (k0 + kBc > p.seq || (kCausal && k0 + kBc - 1 > first_row)) mask_scores_wgmma<kCausal>(s, k0, row, t, p.seq);
      online_softmax_wgmma<D>(s, m, l, o, c);
      std::uint32_t pa[kBc / 16][4];
      pack_p(pa, s);
      kl::wgmma_fence();  // P and the rescaled O were written by ordinary instructions
      accumulate_pv_wgmma<D>(o, pa, vs);
      kl::wgmma_commit();
      kl::wgmma_wait<0>();
    }
    __syncthreads();  // both groups are done with this stage before the next cp.async overwrites it
  }
  store_output_wgmma<D>(p.o + base, o, l, row, t, p.seq);
}

// Dynamic shared memory of step 2, with room to align its start to 1024 bytes.
template <int D>
constexpr std::size_t flash_wgmma_smem() {
  return WgmmaSmem<D>::kBytes + 1024;
}

// One kernel instance per head dimension and causality, as lesson 07's steps.
template <int D, bool kCausal>
void launch_wgmma_as(const Problem& p, cudaStream_t s) {
  launch_flash<flash_wgmma<D, kCausal>>(flash_wgmma_smem<D>(), kWgmmaGroups * 128, p, s);
}

inline void launch_wgmma(const Problem& p, lesson07::Workspace&, cudaStream_t s) {
  with_dim_causal(p, [&](auto d, auto causal) { launch_wgmma_as<decltype(d)::value, decltype(causal)::value>(p, s); });
}

}  // namespace lesson09
