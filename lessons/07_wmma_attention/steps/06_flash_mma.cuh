// Lesson 07, step 6 (flash part): the FA2 recipe on mma.sync. Step 5's loop over key tiles with Q, S, P
// and O in registers, K and V streamed in by cp.async (two stages), read by ldmatrix from swizzled
// tiles. The PTX wrappers and the fragment layouts are in common/ptx.cuh; the tile loads, the two
// products on fragments and the store, in parts.cuh. mma.sync m16n8k16, ldmatrix
// and cp.async need sm_80: below it the kernel is compiled out and the launcher refuses the step (n/a);
// step 5 (WMMA) is the flash step there.
#pragma once
#include <string>

#include "common/arch.cuh"
#include "common/ptx.cuh"
#include "common/softmax_math.cuh"
#include "lessons/07_wmma_attention/parts.cuh"

namespace lesson07 {

// Step 6's block: 8 warps of 16 query rows. Each K/V tile brought to shared memory serves 128 queries
// (step 5: 64), and 2 blocks per SM at D = 64 (one at D = 128) keep 16 (8) warps resident.
constexpr int kMmaWarps = 8, kMmaBr = 16 * kMmaWarps;

// -inf for the keys past the sequence's end and, when causal, those after the query row.
template <bool kCausal>
__device__ __forceinline__ void mask_scores(float (&s)[kBc / 8][4], int k0, int row0, int t, int seq) {
#pragma unroll
  for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = k0 + nt * 8 + 2 * t + e % 2, row = row0 + (e / 2) * 8;
      if (key >= seq || (kCausal && key > row)) s[nt][e] = -INFINITY;
    }
}

// The online softmax for rows g (h = 0) and g + 8 (h = 1): the new max over the quad, P = 2^(S c - m c)
// in place of S, the running sum l (this lane's part) and the output rescaled by alpha.
template <int D>
__device__ __forceinline__ void online_softmax_update(float (&s)[kBc / 8][4], float (&m)[2], float (&l)[2],
                                                      float (&o)[D / 8][4], float c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mt = m[h];
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) mt = fmaxf(mt, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 1));
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 2));
    const float mc = mt == -INFINITY ? 0.f : mt * c;
    const float alpha = kl::exp2_approx(m[h] * c - mc);
    m[h] = mt;
    float sum = 0;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) sum += s[nt][e] = kl::exp2_approx(fmaf(s[nt][e], c, -mc));
    l[h] = l[h] * alpha + sum;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][2 * h] *= alpha;
      o[n][2 * h + 1] *= alpha;
    }
  }
}

// Step 5 on mma.sync: Q fragments stay in registers for the whole key loop; S = Q·Kᵀ lands in C
// fragments whose rows are known (g and g+8), so the row max and sum take two quad shuffles; P is
// packed to f16 A fragments in place and multiplies V at once; the next K/V tile streams in by
// cp.async while this one is used; ldmatrix reads swizzled (conflict-free) tiles; 2 barriers per tile;
// a warp whose rows are all above a causal key tile skips it.
template <int D, bool kCausal>
__global__ void __launch_bounds__(kMmaWarps * 32, D == 64 ? 2 : 1) flash_mma(Problem p) {
#if KL_ARCH_AT_LEAST(80)
  extern __shared__ __align__(128) unsigned char smem[];
  __half* kst = reinterpret_cast<__half*>(smem);  // [2 stages][kBc * D] for K, then the same for V
  __half* vst = kst + 2 * kBc * D;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  std::int64_t head;
  int q0;
  flash_block(p, kMmaBr, head, q0);
  const std::int64_t base = head * p.seq * D;
  const __half *k = p.k + base, *v = p.v + base;
  const int nk = key_tiles(p, q0, kMmaBr);
  load_kv_async<D>(kst, vst, k, v, 0, p.seq);
  kl::cp_async_commit();

  const int row0 = q0 + w * 16 + g;
  std::uint32_t qa[D / 16][4];
  load_q_fragments<D>(qa, p, base, row0, t);

  const float c = p.scale * kl::kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
  float o[D / 8][4] = {};
  const int mi = lane / 8, r8 = lane % 8;
  for (int kt = 0; kt < nk; ++kt) {
    const int k0 = kt * kBc, stage = kt % 2;
    if (kt + 1 < nk) {
      load_kv_async<D>(kst + (1 - stage) * kBc * D, vst + (1 - stage) * kBc * D, k, v, k0 + kBc, p.seq);
      kl::cp_async_commit();
      kl::cp_async_wait<1>();
    } else {
      kl::cp_async_wait<0>();
    }
    __syncthreads();  // this stage's tile has landed for every thread
    const __half* ks = kst + stage * kBc * D;
    const __half* vs = vst + stage * kBc * D;
    if (!kCausal || k0 <= row0 - g + 15) {  // else the warp's 16 rows see none of these keys
      float s[kBc / 8][4] = {};
      scores_qk<D>(s, qa, ks, r8, mi);
      // mask only the tiles that need it: the sequence's tail and, when causal, the diagonal
      if (k0 + kBc > p.seq || (kCausal && k0 + kBc - 1 > row0 - g)) mask_scores<kCausal>(s, k0, row0, t, p.seq);
      online_softmax_update<D>(s, m, l, o, c);
      accumulate_pv<D>(o, s, vs, r8, mi);
    }
    __syncthreads();  // every warp is done with this stage before the next cp.async overwrites it
  }
  store_output<D>(p.o + base, o, l, row0, t, p.seq);
#endif
}

template <int D>
constexpr std::size_t flash_mma_smem() {
  return 2 * 2 * kBc * D * 2;  // K and V, two stages
}

// One instance, refused first where it was compiled out of this build or the GPU is older than sm_80.
template <int D, bool kCausal>
void launch_flash_mma_as(const Problem& p, cudaStream_t s) {
  kl::require_arch<flash_mma<D, kCausal>>(80);
  launch_with_smem<flash_mma<D, kCausal>>(flash_mma_smem<D>(), kMmaWarps, p, s);
}

inline void launch_flash_mma(const Problem& p, Workspace&, cudaStream_t s) {
  if (p.dim == 64 && p.causal) launch_flash_mma_as<64, true>(p, s);
  else if (p.dim == 64) launch_flash_mma_as<64, false>(p, s);
  else if (p.causal) launch_flash_mma_as<128, true>(p, s);
  else launch_flash_mma_as<128, false>(p, s);
}

}  // namespace lesson07
