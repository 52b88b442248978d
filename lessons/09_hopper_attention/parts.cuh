// Lesson 09, the pieces several steps share, each under the step that introduces it: the warpgroup's
// wgmma products, its softmax and store on the accumulator layout and the launch (step 2); the TMA
// boxes, their stages and barriers (step 3); the producer, setmaxnreg and the barriers of warp
// specialisation (step 4). The rest of a step (its kernel and launcher) is in steps/. Compiled for
// sm_90a alone (the lesson09_hopper target), as the step files that include it.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/check.cuh"
#include "common/device.cuh"
#include "common/ptx.cuh"
#include "common/softmax_math.cuh"
#include "common/tma.cuh"
#include "common/wgmma.cuh"
#include "lessons/07_wmma_attention/parts.cuh"

namespace lesson09 {

using lesson07::kBc;  // keys per tile: 64
using lesson07::Problem;

// ---- introduced by step 2 (wgmma), used by steps 2-5 ----------------------------------------------

// Step 2's block: two warpgroups of 64 query rows share each K/V tile (128 rows, as lesson 07's step 6).
constexpr int kWgmmaGroups = 2, kWgmmaBr = 64 * kWgmmaGroups;

// Steps 2-5: the start of the dynamic shared memory rounded up to 1024 bytes, the alignment the 128-byte
// swizzle of wgmma's and TMA's panels repeats on; each kernel asks for 1024 bytes more than its layout.
__device__ __forceinline__ unsigned char* aligned_smem(unsigned char* raw) {
  return reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
}

// S[64 x N] = Q·Kᵀ for this warpgroup (N = 2 NS keys: 64, or 128 from step 6 on): D/16 wgmmas, k-step s
// reads 16 columns of panel s / 4 of both; Q's panels hold 64 rows, K's N.
template <int D, int NS>
__device__ __forceinline__ void scores_wgmma(float (&s)[NS], const unsigned char* q, const unsigned char* k) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const int q_off = (ks / 4) * 64 * kl::kRowBytes + (ks % 4) * 32,
              k_off = (ks / 4) * 2 * NS * kl::kRowBytes + (ks % 4) * 32;
    const std::uint64_t a = kl::smem_desc(q + q_off, 16, kl::kAtomBytes),
                        b = kl::smem_desc(k + k_off, 16, kl::kAtomBytes);
    if constexpr (NS == 32) kl::wgmma_m64n64k16_ss(s, a, b, ks > 0);
    else kl::wgmma_m64n128k16_ss(s, a, b, ks > 0);
  }
}

// P as f16 A fragments: k-step ks takes keys 16ks .. 16ks + 15, i.e. S's accumulator columns 16ks ..
// +15, which in f16 pairs are exactly the A layout (rows g and g+8, columns 2t and 8 + 2t).
template <int NS>
__device__ __forceinline__ void pack_p(std::uint32_t (&a)[NS / 8][4], const float (&s)[NS]) {
#pragma unroll
  for (int ks = 0; ks < NS / 8; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) a[ks][i] = kl::pack_half2(s[8 * ks + 2 * i], s[8 * ks + 2 * i + 1]);
}

// O[64 x D] += P·V, one wgmma per 16 keys (KS of them); V's 64-column panels (16 KS rows each) are LBO
// apart, its 8-key atoms SBO.
template <int D, int KS>
__device__ __forceinline__ void accumulate_pv_wgmma(float (&o)[D / 2], const std::uint32_t (&a)[KS][4],
                                                    const unsigned char* v) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const std::uint64_t b = kl::smem_desc(v + ks * 16 * kl::kRowBytes, 16 * KS * kl::kRowBytes, kl::kAtomBytes);
    if constexpr (D == 64) kl::wgmma_m64n64k16_rs(o, a[ks], b, 1);
    else kl::wgmma_m64n128k16_rs(o, a[ks], b, 1);
  }
}

// In a wgmma accumulator of 64 x N, thread (warp w of the group, lane = 4g + t) holds rows 16w + g
// (registers 4j, 4j+1) and 16w + g + 8 (4j+2, 4j+3) at columns 8j + 2t and 8j + 2t + 1.
__device__ __forceinline__ int acc_col(int i, int t) { return 8 * (i / 4) + 2 * t + (i % 2); }

// -inf for the keys past the sequence's end and, when causal, those after the query row.
template <bool kCausal, int NS>
__device__ __forceinline__ void mask_scores_wgmma(float (&s)[NS], int k0, int row, int t, int seq) {
#pragma unroll
  for (int i = 0; i < NS; ++i) {
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

// 1 / l for rows g and g + 8: the lanes of a quad hold partial sums of the same rows. One division a
// row, then a multiply per element (a division is a reciprocal, its refinement and a slow-path check).
__device__ __forceinline__ void inverse_row_sums(const float (&l)[2], float (&r)[2]) {
  for (int h = 0; h < 2; ++h) {
    float sum = l[h] + __shfl_xor_sync(kl::kFullMask, l[h], 1);
    sum += __shfl_xor_sync(kl::kFullMask, sum, 2);
    r[h] = 1.0f / sum;
  }
}

// O / l for rows g and g + 8 to f16, straight from the registers to global memory. Lane t of a quad
// holds columns 8j + 2t, 8j + 2t + 1; the four lanes trade pairs (a 4 x 4 transpose in two shuffle rounds)
// so that lane t holds the 8 columns of j = 4q + t: one 16-byte store instead of four 4-byte ones, a
// quarter of the store instructions for the memory pipeline.
template <int D>
__device__ __forceinline__ void store_output_wgmma(__half* o_head, const float (&o)[D / 2], const float (&l)[2],
                                                   int row, int t, int seq) {
  float r[2];
  inverse_row_sums(l, r);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int q = 0; q < D / 32; ++q) {
      std::uint32_t a[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        a[i] = kl::pack_half2(o[16 * q + 4 * i + 2 * h] * r[h], o[16 * q + 4 * i + 2 * h + 1] * r[h]);
#pragma unroll
      for (int m = 1; m <= 2; m *= 2)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (i & m) continue;  // the pair (i, i + m): lanes with bit m of t clear keep i, the others i + m
          const std::uint32_t got = __shfl_xor_sync(kl::kFullMask, (t & m) ? a[i] : a[i | m], m);
          if (t & m) a[i] = got;
          else a[i | m] = got;
        }
      if (row + 8 * h < seq)
        *reinterpret_cast<uint4*>(o_head + static_cast<std::int64_t>(row + 8 * h) * D + 8 * (4 * q + t)) =
            make_uint4(a[0], a[1], a[2], a[3]);
    }
  }
}

// Calls f(D, causal) as std::integral_constants for the problem's head dimension (64 or 128) and
// causality: each step's kernels are compiled for the four, and its launcher picks one this way.
template <class F>
void with_dim_causal(const Problem& p, F&& f) {
  if (p.dim == 64) {
    if (p.causal) f(std::integral_constant<int, 64>{}, std::true_type{});
    else f(std::integral_constant<int, 64>{}, std::false_type{});
  } else {
    if (p.causal) f(std::integral_constant<int, 128>{}, std::true_type{});
    else f(std::integral_constant<int, 128>{}, std::false_type{});
  }
}

// A flash kernel of `blocks` blocks with more than the default 48 KiB of shared memory: allowed once per
// kernel, on its first launch (the untimed check run).
template <auto Kernel, class... Args>
void launch_flash_grid(unsigned blocks, std::size_t smem, int threads, const Problem& p, cudaStream_t s,
                       const Args&... args) {
  static const bool allowed = [smem] {
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)allowed;
  Kernel<<<blocks, threads, smem, s>>>(p, args...);
  CUDA_CHECK_LAUNCH();
}

// Steps 2-6: one block per br query rows of a head (lesson 07's order; 128 but for step 6 at D = 64).
template <auto Kernel, class... Args>
void launch_flash_rows(int br, std::size_t smem, int threads, const Problem& p, cudaStream_t s, const Args&... args) {
  launch_flash_grid<Kernel>(lesson07::flash_blocks(p, br), smem, threads, p, s, args...);
}

template <auto Kernel, class... Args>
void launch_flash(std::size_t smem, int threads, const Problem& p, cudaStream_t s, const Args&... args) {
  launch_flash_rows<Kernel>(kWgmmaBr, smem, threads, p, s, args...);
}

// ---- introduced by step 3 (TMA on mbarriers), used by steps 3-5 ----------------------------------

constexpr int kTmaStages = 3;

// Shared memory of step 3: step 2's panels with kTmaStages stages of K and V, then the barriers
// (one per stage, and one for Q).
template <int D>
struct TmaSmem {
  static constexpr int kPanels = D / kl::kPanelCols, kPanelBytes = 64 * kl::kRowBytes, kTile = kPanels * kPanelBytes;
  static constexpr int kQ = 0, kK = kQ + kWgmmaGroups * kTile, kV = kK + kTmaStages * kTile;
  static constexpr int kBars = kV + kTmaStages * kTile, kBytes = kBars + 8 * (kTmaStages + 1);
};

// A [heads_total, seq, dim] f16 tensor (Q, K or V of lesson 07's layout) as the copy engine sees it:
// boxes of `rows` rows x 64 columns (one swizzled panel: 8 KiB at 64 rows), rows past seq zero-filled.
inline CUtensorMap head_tensor_map(const void* base, std::int64_t heads_total, int seq, int dim, int rows = 64) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(dim), static_cast<cuuint64_t>(seq),
                              static_cast<cuuint64_t>(heads_total)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(dim) * 2, static_cast<cuuint64_t>(seq) * dim * 2};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(rows), 1};
  return kl::tensor_map(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, base, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

// The three tensors of one problem as the copy engine sees them ([B·H, S, D], 64 x 64 boxes).
struct TmaMaps {
  CUtensorMap q, k, v;
};

// Key tile t of this head into its stage: K and V, every panel, counted on the stage's barrier.
template <int D>
__device__ __forceinline__ void issue_kv_tile(unsigned char* smem, const TmaMaps& maps, int t, int head) {
  using L = TmaSmem<D>;
  const int stage = t % kTmaStages;
  auto* bar = reinterpret_cast<std::uint64_t*>(smem + L::kBars) + stage;
  kl::mbarrier_arrive_expect_tx(bar, 2 * L::kTile);
#pragma unroll
  for (int p = 0; p < L::kPanels; ++p) {
    kl::tma_load_3d(smem + L::kK + stage * L::kTile + p * L::kPanelBytes, &maps.k, 64 * p, t * kBc, head, bar);
    kl::tma_load_3d(smem + L::kV + stage * L::kTile + p * L::kPanelBytes, &maps.v, 64 * p, t * kBc, head, bar);
  }
}

inline TmaMaps tma_maps(const Problem& p) {
  return {head_tensor_map(p.q, p.heads_total(), p.seq, p.dim), head_tensor_map(p.k, p.heads_total(), p.seq, p.dim),
          head_tensor_map(p.v, p.heads_total(), p.seq, p.dim)};
}

// ---- introduced by step 4 (warp specialisation), used by steps 4-5 -------------------------------

// Producer warpgroup 0, consumer warpgroups 1 and 2 (64 query rows each, as in steps 2-3).
constexpr int kWsThreads = 128 * (1 + kWgmmaGroups);

// setmaxnreg (kl::setmaxnreg_dec / _inc) hands the producer's registers to the consumers; .inc only
// takes registers that .dec released in the same block. One block a SM (384 threads enter with 168
// registers): the producer drops to 24, the consumers grow to 240 (O alone is 64 a thread at D = 128).
// Two blocks a SM at D = 64 would leave the consumers 104 registers, too few for the wgmma chains
// (ptxas serialises them and spills), so steps 4-5 run one block a SM.
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

template <int D>
constexpr std::size_t flash_ws_smem() {
  return WsSmem<D>::kBytes + 1024;
}

// Steps 4-5: thread 0 initialises the full barriers (kTmaStages stages and Q: one arrival each, the
// producer's expect_tx) and the empty ones (every consumer thread arrives), before anyone uses them.
template <int kStages = kTmaStages, int kGroups = kWgmmaGroups>
__device__ __forceinline__ void init_ws_barriers(std::uint64_t* full, std::uint64_t* empty) {
  if (threadIdx.x == 0) {
    for (int s = 0; s <= kStages; ++s) kl::mbarrier_init(full + s, 1);
    for (int s = 0; s < kStages; ++s) kl::mbarrier_init(empty + s, kGroups * 128);
    kl::mbarrier_init_fence();
  }
  __syncthreads();
}

// ---- introduced by step 5 (the softmax under the P·V GEMM), used by steps 5-6 --------------------------

// Step 2's online softmax without touching O: the new max, P = 2^(S c - m c) in place of S, the running
// sum, and the factor alpha by which O must still be rescaled (when the P·V in flight is done).
// NS scores a thread (32: a 64 x 64 tile; 64: step 6's 64 x 128), NS / 2 per row h.
template <int NS>
__device__ __forceinline__ void softmax_deferred(float (&s)[NS], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                 float c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mt = m[h];
#pragma unroll
    for (int j = 0; j < NS / 4; ++j) mt = fmaxf(mt, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 1));
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 2));
    const float mc = mt == -INFINITY ? 0.f : mt * c;
    alpha[h] = kl::exp2_approx(m[h] * c - mc);
    m[h] = mt;
    float sum = 0;
#pragma unroll
    for (int j = 0; j < NS / 4; ++j)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) sum += s[4 * j + e] = kl::exp2_approx(fmaf(s[4 * j + e], c, -mc));
    l[h] = l[h] * alpha[h] + sum;
  }
}

template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * j + e] *= alpha[e / 2];
}

// The softmax step 5 runs (exercise 09.2 puts its own in its place).
struct DeferredSoftmax {
  template <int NS>
  __device__ __forceinline__ static void apply(float (&s)[NS], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                               float c) {
    softmax_deferred(s, m, l, alpha, c);
  }
};

// ---- introduced by step 6 (128-key tiles), used by steps 6-7 --------------------------------------------

constexpr int kWideBc = 128, kWideStages = 3;

// The block: consumer groups of 64 query rows, three at D = 64, whose S, P and O (64 + 32 + 32 a thread)
// fit the 160 registers 512 threads leave them, two at D = 128 (O is 64 more; 240). Its shared memory:
// Q, kWideStages stages of K and V of 128 rows, the full and empty barriers (224 KiB at D = 128).
template <int D>
struct WideSmem {
  static constexpr int kGroups = D == 64 ? 3 : 2, kBr = 64 * kGroups, kThreads = 128 * (1 + kGroups);
  static constexpr int kConsumerRegs = D == 64 ? 160 : lesson09::kConsumerRegs;
  static constexpr int kPanels = D / kl::kPanelCols;
  static constexpr int kQTile = kPanels * 64 * kl::kRowBytes, kPanelBytes = kWideBc * kl::kRowBytes;
  static constexpr int kTile = kPanels * kPanelBytes;  // 128 keys
  static constexpr int kQ = 0, kK = kQ + kGroups * kQTile, kV = kK + kWideStages * kTile;
  static constexpr int kBars = kV + kWideStages * kTile, kEmpty = kBars + 8 * (kWideStages + 1);
  static constexpr int kBytes = kEmpty + 8 * kWideStages;
};
static_assert(WideSmem<128>::kBytes + 1024 <= 227 * 1024,
              "a block's shared memory on sm_90 (with the 1 KiB alignment)");

// Step 4's producer with 128-key boxes (one TMA per 64-column panel), in two parts that step 7 issues in
// another order: Q of every group on Q's barrier, and key tile t of K and V into stage `it` % kWideStages
// once the groups have released it (`it` counts the key tiles the block loaded before, from step 7 on).
template <int D>
__device__ __forceinline__ void load_q_wide(unsigned char* smem, const TmaMaps& maps, int q0, int head) {
  using L = WideSmem<D>;
  auto* q_full = reinterpret_cast<std::uint64_t*>(smem + L::kBars) + kWideStages;
  kl::mbarrier_arrive_expect_tx(q_full, L::kGroups * L::kQTile);
  for (int gr = 0; gr < L::kGroups; ++gr)
    for (int pn = 0; pn < L::kPanels; ++pn)
      kl::tma_load_3d(smem + L::kQ + gr * L::kQTile + pn * 64 * kl::kRowBytes, &maps.q, 64 * pn, q0 + 64 * gr, head,
                      q_full);
}
template <int D>
__device__ __forceinline__ void load_kv_wide(unsigned char* smem, const TmaMaps& maps, int t, int head, int it) {
  using L = WideSmem<D>;
  auto* full = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  auto* empty = reinterpret_cast<std::uint64_t*>(smem + L::kEmpty);
  const int stage = it % kWideStages;
  kl::mbarrier_wait(empty + stage, (it / kWideStages + 1) % 2);
  kl::mbarrier_arrive_expect_tx(full + stage, 2 * L::kTile);
  for (int pn = 0; pn < L::kPanels; ++pn) {
    const int off = stage * L::kTile + pn * L::kPanelBytes;
    kl::tma_load_3d(smem + L::kK + off, &maps.k, 64 * pn, t * kWideBc, head, full + stage);
    kl::tma_load_3d(smem + L::kV + off, &maps.v, 64 * pn, t * kWideBc, head, full + stage);
  }
}
template <int D>
__device__ __forceinline__ void produce_wide(unsigned char* smem, const TmaMaps& maps, int q0, int head, int nk) {
  load_q_wide<D>(smem, maps, q0, head);
  for (int t = 0; t < nk; ++t) load_kv_wide<D>(smem, maps, t, head, t);
}

// Q in 64-row boxes, K and V in 128-row boxes.
inline TmaMaps wide_tma_maps(const Problem& p) {
  return {head_tensor_map(p.q, p.heads_total(), p.seq, p.dim),
          head_tensor_map(p.k, p.heads_total(), p.seq, p.dim, kWideBc),
          head_tensor_map(p.v, p.heads_total(), p.seq, p.dim, kWideBc)};
}

// ---- introduced by step 7 (one block per SM), used by steps 7-8 ---------------------------------------

// Step 6's shared memory, the number of the block's tile and Q's "empty" barrier (every consumer thread
// arrives on it once its group's last S = Q·Kᵀ of a tile is done).
template <int D>
struct PersistentSmem : WideSmem<D> {
  static constexpr int kQEmpty = WideSmem<D>::kBytes, kTileNo = kQEmpty + 8, kBytes = kTileNo + 8;
};
static_assert(PersistentSmem<128>::kBytes + 1024 <= 227 * 1024, "a block's shared memory on sm_90");

// The tiles drawn so far, set to 0 before every launch (one launch at a time on this device).
__device__ unsigned next_query_tile;

// Key tiles a query tile starting at row q0 reads: all of the head's `all`, or causal up to its last row's.
template <int D, bool kCausal>
__device__ __forceinline__ int persistent_key_tiles(int q0, int all) {
  return kCausal ? min(all, (q0 + PersistentSmem<D>::kBr + kWideBc - 1) / kWideBc) : all;
}

// Step 7's producer (thread 0): draws tiles (flash_tile's order: each head's tiles, the longest causal first)
// until none is left, and for each loads its first K and V into a stage the groups have released, then, once
// every group is done with the previous Q, the tile's number and Q, then its other K and V; the next tile is
// drawn as soon as this one's loads are issued (its atomic is not waited for between tiles).
template <int D, bool kCausal>
__device__ __forceinline__ void produce_persistent(unsigned char* smem, const Problem& p, const TmaMaps& maps,
                                                   unsigned tiles, int all) {
  using L = PersistentSmem<D>;
  auto* full = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  auto* q_empty = reinterpret_cast<std::uint64_t*>(smem + L::kQEmpty);
  volatile unsigned* tile_no = reinterpret_cast<unsigned*>(smem + L::kTileNo);
  int it = 0;  // key tiles loaded before this query tile
  for (unsigned n = 0, tile = atomicAdd(&next_query_tile, 1u);; ++n) {
    std::int64_t head = 0;
    int q0 = 0;
    if (tile < tiles) {
      lesson07::flash_tile(p, L::kBr, tile, head, q0);
      load_kv_wide<D>(smem, maps, 0, static_cast<int>(head), it);
    }
    kl::mbarrier_wait(q_empty, (n + 1) % 2);  // the groups are done with the previous tile's Q and number
    *tile_no = tile;
    if (tile >= tiles) {
      kl::mbarrier_arrive(full + kWideStages);  // no tile left: the groups wake, read it and stop
      return;
    }
    load_q_wide<D>(smem, maps, q0, static_cast<int>(head));
    const int nk = persistent_key_tiles<D, kCausal>(q0, all);
    for (int kt = 1; kt < nk; ++kt) load_kv_wide<D>(smem, maps, kt, static_cast<int>(head), it + kt);
    it += nk;
    tile = atomicAdd(&next_query_tile, 1u);
  }
}

// A persistent kernel's launch: a block per SM (or per query tile, if fewer), the counter zeroed first on the
// stream (a graph captures both).
template <auto Kernel, int D>
void launch_persistent_grid(const Problem& p, cudaStream_t s) {
  using L = PersistentSmem<D>;
  static void* const counter = [] {
    void* ptr = nullptr;
    CUDA_CHECK(cudaGetSymbolAddress(&ptr, next_query_tile));
    return ptr;
  }();
  const unsigned blocks = std::min(lesson07::flash_blocks(p, L::kBr), static_cast<unsigned>(kl::sm_count()));
  CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(unsigned), s));
  launch_flash_grid<Kernel>(blocks, L::kBytes + 1024, L::kThreads, p, s, wide_tma_maps(p));
}

}  // namespace lesson09
