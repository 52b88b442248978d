// Lesson 07, the pieces several steps share, each with the step that introduces it: the WMMA tile
// products (step 1), the two-rows softmax (step 2), the 8-warp block of tiles (step 3), the flash
// loop's block and key-tile bookkeeping and launch (step 5), and step 6's swizzled tiles and mma.sync
// products (lesson 09's step 1 is step 6, and its later steps build on these layouts).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "common/check.cuh"
#include "common/ptx.cuh"
#include "common/warp.cuh"
#include "lessons/07_wmma_attention/problem.cuh"

namespace lesson07 {

// The library baseline's scratch (attention.cuh); the steps' launchers take it and ignore it.
struct Workspace;

// ---- the tile part ------------------------------------------------------------------------------------

namespace wmma = nvcuda::wmma;
constexpr int kT = 16;  // the tile: 16 queries, 16 keys, 16 dims

// Step 1: S = QKᵀ and O = PV by WMMA (K read as a column-major B: its rows are Kᵀ's columns); the
// scores, the probabilities and the output pass through shared memory between the steps.
__device__ __forceinline__ void tile_scores(const __half* q, const __half* k, float* s) {
  wmma::fragment<wmma::matrix_a, kT, kT, kT, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, kT, kT, kT, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, kT, kT, kT, float> c;
  wmma::fill_fragment(c, 0.f);
  wmma::load_matrix_sync(a, q, kT);
  wmma::load_matrix_sync(b, k, kT);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(s, c, kT, wmma::mem_row_major);
}

// Step 1: O = P·V, through a float tile in shared memory (WMMA stores accumulators only there), to f16.
__device__ __forceinline__ void tile_output(const __half* p, const __half* v, float* scratch, __half* o) {
  wmma::fragment<wmma::matrix_a, kT, kT, kT, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, kT, kT, kT, __half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, kT, kT, kT, float> c;
  wmma::fill_fragment(c, 0.f);
  wmma::load_matrix_sync(a, p, kT);
  wmma::load_matrix_sync(b, v, kT);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(scratch, c, kT, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  for (int i = lane; i < kT * kT; i += 32) o[i] = __float2half_rn(scratch[i]);
}

// Step 2 (steps 2 and 3 use it): lanes 16-31 take the odd row of each pair, 8 passes instead of 16,
// and the reductions stay inside each half-warp (4 shuffle steps instead of 5).
__device__ __forceinline__ void softmax_two_rows(const float* s, __half* p, float scale) {
  const int lane = threadIdx.x % 32, col = lane % kT;
  for (int pass = 0; pass < kT / 2; ++pass) {
    const int row = 2 * pass + lane / kT;
    const float x = s[row * kT + col] * scale;
    float m = x;
    for (int o = 8; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(kl::kFullMask, m, o));
    const float e = kl::fast_exp(x - m);
    float sum = e;
    for (int o = 8; o > 0; o /= 2) sum += __shfl_xor_sync(kl::kFullMask, sum, o);
    p[row * kT + col] = __float2half_rn(e / sum);
  }
}

// Step 3 (steps 3 and 4): 8 warps per block, one tile each.
constexpr int kTileWarps = 8;

inline unsigned tile_blocks(const Problem& p) { return static_cast<unsigned>((p.batch + kTileWarps - 1) / kTileWarps); }

// ---- the flash part (steps 5 and 6) ---------------------------------------------------------------------

constexpr int kBc = 64;  // keys per tile of the loop

// Step 5: the head and first query row of query tile `tile`. Neighbouring tiles are the query tiles of
// one head, so the blocks on the GPU at a time share a few heads' K and V in L2 (in head-minor order every
// block would read another head's). Within a head the last query tiles (the most keys when causal)
// come first.
__device__ __forceinline__ void flash_tile(const Problem& p, int br, unsigned tile, std::int64_t& head, int& q0) {
  const int nq = (p.seq + br - 1) / br;
  head = tile / nq;
  q0 = (nq - 1 - static_cast<int>(tile % nq)) * br;
}

// Step 5: one block per query tile; block b takes tile b.
__device__ __forceinline__ void flash_block(const Problem& p, int br, std::int64_t& head, int& q0) {
  flash_tile(p, br, blockIdx.x, head, q0);
}

// Step 5: the key tiles a query tile [q0, q0 + br) needs: all of them, or up to the diagonal when causal.
__device__ __forceinline__ int key_tiles(const Problem& p, int q0, int br) {
  const int nk = (p.seq + kBc - 1) / kBc;
  return p.causal ? min(nk, (q0 + br + kBc - 1) / kBc) : nk;
}

// Step 5: one block per query tile of br rows, over all heads.
inline unsigned flash_blocks(const Problem& p, int br) {
  const std::int64_t n = (p.seq + br - 1) / br * p.heads_total();
  if (n > 0x7fffffff) throw kl::NotSupported("more than 2^31 - 1 query tiles");
  return static_cast<unsigned>(n);
}

// Step 5: the flash kernels ask for more than the default 48 KiB of shared memory: allowed once per
// kernel (on its first launch, the untimed check run, so never inside a CUDA-graph capture).
template <auto Kernel>
void launch_with_smem(std::size_t smem, int warps, const Problem& p, cudaStream_t s) {
  static const bool allowed = [smem] {
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)allowed;
  Kernel<<<flash_blocks(p, 16 * warps), warps * 32, smem, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// ---- introduced by step 6 (the flash part on mma.sync; lesson 09's step 1 is that step) --------------
// Its swizzled tiles, loads, the two products on fragments and the store; the softmax on the fragments
// stays in the step file.
// Shared tiles are [64 rows][D] f16 with the 16-byte chunk c of row r stored at chunk c ^ (r % 8):
// the 8 rows an ldmatrix reads at one column then fall in 8 different bank groups (no conflicts).
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row % 8)) * 8);
}

// K and V tile [k0, k0 + 64) of one head into a stage: 16-byte cp.async per chunk, zero-filled past S.
template <int D>
__device__ __forceinline__ void load_kv_async(__half* ks, __half* vs, const __half* k, const __half* v, int k0,
                                              int seq) {
  for (int i = threadIdx.x; i < kBc * D / 8; i += blockDim.x) {
    const int r = i / (D / 8), ch = i % (D / 8);
    const bool ok = k0 + r < seq;
    const std::int64_t g = ok ? static_cast<std::int64_t>(k0 + r) * D + ch * 8 : 0;
    kl::cp_async16(ks + swz<D>(r, ch), k + g, ok ? 16 : 0);
    kl::cp_async16(vs + swz<D>(r, ch), v + g, ok ? 16 : 0);
  }
}

// Q's A fragments, straight from global memory (once per block): rows g and g+8 of the warp's 16.
template <int D>
__device__ __forceinline__ void load_q_fragments(std::uint32_t (&qa)[D / 16][4], const Problem& p, std::int64_t base,
                                                 int row0, int t) {
  for (int kk = 0; kk < D / 16; ++kk) {
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + (i % 2) * 8, col = kk * 16 + (i / 2) * 8 + 2 * t;
      qa[kk][i] = row < p.seq
                      ? *reinterpret_cast<const std::uint32_t*>(p.q + base + static_cast<std::int64_t>(row) * D + col)
                      : 0u;
    }
  }
}

// S (16 × 64) = Q·Kᵀ: n-tile nt holds keys nt*8 .. +7; one ldmatrix.x4 gives two k-steps of it.
template <int D>
__device__ __forceinline__ void scores_qk(float (&s)[kBc / 8][4], const std::uint32_t (&qa)[D / 16][4],
                                          const __half* ks, int r8, int mi) {
#pragma unroll
  for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk += 2) {
      std::uint32_t b[4];
      kl::ldmatrix_x4(b, ks + swz<D>(nt * 8 + r8, kk * 2 + mi));
      kl::mma_16816(s[nt], qa[kk], b[0], b[1]);
      kl::mma_16816(s[nt], qa[kk + 1], b[2], b[3]);
    }
  }
}

// O += P·V: k-step ks16 = keys 16ks16 .. +15 = S's n-tiles 2ks16 and 2ks16+1, already in A layout.
template <int D>
__device__ __forceinline__ void accumulate_pv(float (&o)[D / 8][4], const float (&s)[kBc / 8][4], const __half* vs,
                                              int r8, int mi) {
#pragma unroll
  for (int ks16 = 0; ks16 < kBc / 16; ++ks16) {
    const std::uint32_t pa[4] = {
        kl::pack_half2(s[2 * ks16][0], s[2 * ks16][1]), kl::pack_half2(s[2 * ks16][2], s[2 * ks16][3]),
        kl::pack_half2(s[2 * ks16 + 1][0], s[2 * ks16 + 1][1]), kl::pack_half2(s[2 * ks16 + 1][2], s[2 * ks16 + 1][3])};
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      std::uint32_t b[4];
      kl::ldmatrix_x4_trans(b, vs + swz<D>(ks16 * 16 + (mi % 2) * 8 + r8, n + mi / 2));
      kl::mma_16816(o[n], pa, b[0], b[1]);
      kl::mma_16816(o[n + 1], pa, b[2], b[3]);
    }
  }
}

// O / l for rows g and g + 8, to f16; the lanes of a quad hold partial sums of the same rows.
template <int D>
__device__ __forceinline__ void store_output(__half* o_head, const float (&o)[D / 8][4], float (&l)[2], int row0, int t,
                                             int seq) {
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(kl::kFullMask, l[h], 1);
    l[h] += __shfl_xor_sync(kl::kFullMask, l[h], 2);
  }
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + h * 8;
    if (row >= seq) continue;
    auto* out = reinterpret_cast<std::uint32_t*>(o_head + static_cast<std::int64_t>(row) * D);
    for (int n = 0; n < D / 8; ++n) out[n * 4 + t] = kl::pack_half2(o[n][2 * h] / l[h], o[n][2 * h + 1] / l[h]);
  }
}

}  // namespace lesson07
