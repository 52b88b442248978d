// Lesson 09, step 2: lesson 07's flash loop on wgmma. A warpgroup (4 warps) owns 64 query rows and
// computes S = Q·Kᵀ for a 64-key tile in one chain of m64n64k16 wgmmas reading Q and K from shared
// memory, then O += P·V with P straight from the S registers and V read from shared memory through
// the transpose bit: 4 (D = 64) or 8 (D = 128) tensor-core instructions per GEMM where mma.sync needs
// 64. K and V still stream in by cp.async, two stages. Needs sm_90a (lesson09_hopper target).
#pragma once
#include <cstdint>

#include "common/ptx.cuh"
#include "common/softmax_math.cuh"
#include "common/wgmma.cuh"
#include "lessons/07_wmma_attention/parts.cuh"

namespace lesson09 {

using lesson07::kBc;  // keys per tile: 64
using lesson07::Problem;

// Step 2's block: two warpgroups of 64 query rows share each K/V tile (128 rows, as lesson 07's step 6).
constexpr int kWgmmaGroups = 2, kWgmmaBr = 64 * kWgmmaGroups;

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

// S[64 x 64] = Q·Kᵀ for this warpgroup: D/16 wgmmas, k-step s reads 16 columns of panel s / 4 of both.
template <int D>
__device__ __forceinline__ void scores_wgmma(float (&s)[32], const unsigned char* q, const unsigned char* k) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const int off = (ks / 4) * 64 * kl::kRowBytes + (ks % 4) * 32;
    kl::wgmma_m64n64k16_ss(s, kl::smem_desc(q + off, 16, kl::kAtomBytes), kl::smem_desc(k + off, 16, kl::kAtomBytes),
                           ks > 0);
  }
}

// P as f16 A fragments: k-step ks takes keys 16ks .. 16ks + 15, i.e. S's accumulator columns 16ks ..
// +15, which in f16 pairs are exactly the A layout (rows g and g+8, columns 2t and 8 + 2t).
__device__ __forceinline__ void pack_p(std::uint32_t (&a)[kBc / 16][4], const float (&s)[32]) {
#pragma unroll
  for (int ks = 0; ks < kBc / 16; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) a[ks][i] = kl::pack_half2(s[8 * ks + 2 * i], s[8 * ks + 2 * i + 1]);
}

// O[64 x D] += P·V, one wgmma per 16 keys; V's 64-column panels are LBO apart, its 8-key atoms SBO.
template <int D>
__device__ __forceinline__ void accumulate_pv_wgmma(float (&o)[D / 2], const std::uint32_t (&a)[kBc / 16][4],
                                                    const unsigned char* v) {
#pragma unroll
  for (int ks = 0; ks < kBc / 16; ++ks) {
    const std::uint64_t b = kl::smem_desc(v + ks * 16 * kl::kRowBytes, 64 * kl::kRowBytes, kl::kAtomBytes);
    if constexpr (D == 64) kl::wgmma_m64n64k16_rs(o, a[ks], b, 1);
    else kl::wgmma_m64n128k16_rs(o, a[ks], b, 1);
  }
}

// In a wgmma accumulator of 64 x N, thread (warp w of the group, lane = 4g + t) holds rows 16w + g
// (registers 4j, 4j+1) and 16w + g + 8 (4j+2, 4j+3) at columns 8j + 2t and 8j + 2t + 1.
__device__ __forceinline__ int acc_col(int i, int t) { return 8 * (i / 4) + 2 * t + (i % 2); }

// -inf for the keys past the sequence's end and, when causal, those after the query row.
template <bool kCausal>
__device__ __forceinline__ void mask_scores_wgmma(float (&s)[32], int k0, int row, int t, int seq) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int key = k0 + acc_col(i, t), r = row + (i % 4 >= 2 ? 8 : 0);
    if (key >= seq || (kCausal && key > r)) s[i] = -INFINITY;
  }
}

// The online softmax of lesson 07's step 6 on the wgmma layout: rows g (h = 0) and g + 8 (h = 1),
// each spread over the 4 lanes of a quad; P = 2^(S c - m c) replaces S, O is rescaled by alpha.
template <int D>
__device__ __forceinline__ void online_softmax_wgmma(float (&s)[32], float (&m)[2], float (&l)[2], float (&o)[D / 2],
                                                     float c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mt = m[h];
#pragma unroll
    for (int j = 0; j < 8; ++j) mt = fmaxf(mt, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 1));
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 2));
    const float mc = mt == -INFINITY ? 0.f : mt * c;
    const float alpha = kl::exp2_approx(m[h] * c - mc);
    m[h] = mt;
    float sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) sum += s[4 * j + e] = kl::exp2_approx(fmaf(s[4 * j + e], c, -mc));
    l[h] = l[h] * alpha + sum;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j + 2 * h] *= alpha;
      o[4 * j + 2 * h + 1] *= alpha;
    }
  }
}

// O / l for rows g and g + 8 to f16; the lanes of a quad hold partial sums of the same rows.
template <int D>
__device__ __forceinline__ void store_output_wgmma(__half* o_head, const float (&o)[D / 2], float (&l)[2], int row,
                                                   int t, int seq) {
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(kl::kFullMask, l[h], 1);
    l[h] += __shfl_xor_sync(kl::kFullMask, l[h], 2);
  }
  for (int h = 0; h < 2; ++h) {
    if (row + 8 * h >= seq) continue;
    auto* out = reinterpret_cast<std::uint32_t*>(o_head + static_cast<std::int64_t>(row + 8 * h) * D);
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      out[4 * j + t] = kl::pack_half2(o[4 * j + 2 * h] / l[h], o[4 * j + 2 * h + 1] / l[h]);
  }
}

// Step 2: per key tile, one barrier after the tile lands; each warpgroup issues its S chain, waits,
// runs the softmax on the accumulators, issues its P·V chain and waits; the next tile's cp.async is
// in flight meanwhile. A warpgroup whose rows are all above a causal key tile skips it.
template <int D, bool kCausal>
__global__ void __launch_bounds__(kWgmmaGroups * 128, 1) flash_wgmma(Problem p) {
  using L = WgmmaSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t{1023});
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

// Steps 2-5: one block per 128 query rows of a head (lesson 07's order), with more than the default
// 48 KiB of shared memory: allowed once per kernel, on its first launch (the untimed check run).
template <auto Kernel, class... Args>
void launch_flash(std::size_t smem, int threads, const Problem& p, cudaStream_t s, const Args&... args) {
  static const bool allowed = [smem] {
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)allowed;
  Kernel<<<lesson07::flash_blocks(p, kWgmmaBr), threads, smem, s>>>(p, args...);
  CUDA_CHECK_LAUNCH();
}

// One kernel instance per head dimension and causality, as lesson 07's steps.
template <template <int, bool> class Launch>
void by_shape(const Problem& p, cudaStream_t s) {
  if (p.dim == 64) p.causal ? Launch<64, true>::run(p, s) : Launch<64, false>::run(p, s);
  else p.causal ? Launch<128, true>::run(p, s) : Launch<128, false>::run(p, s);
}

template <int D, bool kCausal>
struct WgmmaLaunch {
  static void run(const Problem& p, cudaStream_t s) {
    launch_flash<flash_wgmma<D, kCausal>>(flash_wgmma_smem<D>(), kWgmmaGroups * 128, p, s);
  }
};

inline void launch_wgmma(const Problem& p, lesson07::Workspace&, cudaStream_t s) { by_shape<WgmmaLaunch>(p, s); }

}  // namespace lesson09
