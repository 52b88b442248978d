// Lesson 07, the pieces several steps share, each with the step that introduces it: the WMMA tile
// products (step 1), the two-rows softmax (step 2), the 8-warp block of tiles (step 3), and the flash
// loop's block and key-tile bookkeeping and launch (step 5).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "common/check.cuh"
#include "common/ladder.hpp"
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

// Step 5: the head and first query row of this block. Neighbouring blocks take the query tiles of one
// head, so the blocks on the GPU at a time share a few heads' K and V in L2 (in head-minor order every
// block would read another head's). Within a head the last query tiles (the most keys when causal)
// start first.
__device__ __forceinline__ void flash_block(const Problem& p, int br, std::int64_t& head, int& q0) {
  const int nq = (p.seq + br - 1) / br;
  head = blockIdx.x / nq;
  q0 = (nq - 1 - static_cast<int>(blockIdx.x % nq)) * br;
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

}  // namespace lesson07
