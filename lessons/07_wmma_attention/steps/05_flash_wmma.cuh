// Lesson 07, step 5 (flash part): a flash-attention forward with WMMA. A block of 64 queries loops over
// the keys in tiles of 64 with the online softmax of lesson 04 applied to whole output rows: S never
// reaches global memory. The block order, key-tile count and launch are in parts.cuh (step 6 keeps them).
#pragma once
#include "common/softmax_math.cuh"
#include "lessons/07_wmma_attention/parts.cuh"

namespace lesson07 {

constexpr int kBr = 64, kFlashWarps = 4;  // a block: 64 queries, 4 warps of 16 rows

// Rows [r0, r0 + n) of a [seq, D] head into shared memory (row stride D), zeros past seq: the tails
// are masked, never padded by a copy in global memory.
template <int D>
__device__ __forceinline__ void load_rows(__half* dst, const __half* src, int r0, int n, int seq) {
  for (int i = threadIdx.x; i < n * D / 8; i += blockDim.x) {
    const int r = i / (D / 8), c = i % (D / 8);
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < seq) val = reinterpret_cast<const uint4*>(src + static_cast<std::int64_t>(r0 + r) * D)[c];
    reinterpret_cast<uint4*>(dst + r * D)[c] = val;
  }
}

// Scale the running output by alpha = e^(m_old - m_new) when the row max moves (then add P·V): the
// online softmax of lesson 04 applied to a whole output row instead of a sum. Lane pairs own a row,
// each lane half of its D columns.
template <int D>
__device__ __forceinline__ void rescale_output(float (&o)[D / 2], float alpha) {
#pragma unroll
  for (int j = 0; j < D / 2; ++j) o[j] *= alpha;
}

// The online softmax of lesson 04 over key tiles: per 64 keys, S = Q·Kᵀ by WMMA into shared memory,
// two lanes per row update (max, sum) and write P in f16, O = O·alpha + P·V with the WMMA product
// stored to shared memory and added to the lanes' registers. S never reaches global memory.
template <int D>
__global__ void __launch_bounds__(kFlashWarps * 32) flash_wmma(Problem p) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kW = D > kBc ? D : kBc;  // the float scratch holds S (16×64) or P·V (16×D)
  __half* qs = reinterpret_cast<__half*>(smem);
  __half* ks = qs + kBr * D;
  __half* vs = ks + kBc * D;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* scratch = reinterpret_cast<float*>(vs + kBc * D) + w * 16 * kW;
  __half* ps = reinterpret_cast<__half*>(reinterpret_cast<float*>(vs + kBc * D) + kFlashWarps * 16 * kW) + w * 16 * kBc;

  std::int64_t head;
  int q0;
  flash_block(p, kBr, head, q0);
  const std::int64_t base = head * p.seq * D;
  load_rows<D>(qs, p.q + base, q0, kBr, p.seq);

  const int r = lane / 2, half = lane % 2, qi = q0 + w * 16 + r;
  const float c = p.scale * kl::kLog2e;
  float m = -INFINITY, l = 0, o[D / 2] = {};
  const int nk = key_tiles(p, q0, kBr);
  for (int kt = 0; kt < nk; ++kt) {
    const int k0 = kt * kBc;
    __syncthreads();  // the previous tile is no longer read
    load_rows<D>(ks, p.k + base, k0, kBc, p.seq);
    load_rows<D>(vs, p.v + base, k0, kBc, p.seq);
    __syncthreads();
    for (int n = 0; n < kBc / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
        wmma::load_matrix_sync(a, qs + w * 16 * D + kk * 16, D);
        wmma::load_matrix_sync(b, ks + n * 16 * D + kk * 16, D);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(scratch + n * 16, acc, kW, wmma::mem_row_major);
    }
    __syncwarp();
    // lane pair (2r, 2r+1): row r, keys half*32 .. +32 of the tile
    float sv[kBc / 2], mt = -INFINITY;
    for (int j = 0; j < kBc / 2; ++j) {
      const int key = k0 + half * (kBc / 2) + j;
      const bool masked = key >= p.seq || (p.causal && key > qi);
      sv[j] = masked ? -INFINITY : scratch[r * kW + half * (kBc / 2) + j];
      mt = fmaxf(mt, sv[j]);
    }
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 1));
    const float mn = fmaxf(m, mt), mc = mn == -INFINITY ? 0.f : mn * c;  // a row with no key yet stays 0
    const float alpha = kl::exp2_approx(m * c - mc);
    float sum = 0;
    for (int j = 0; j < kBc / 2; ++j) {
      const float e = kl::exp2_approx(sv[j] * c - mc);
      sum += e;
      ps[r * kBc + half * (kBc / 2) + j] = __float2half_rn(e);
    }
    l = l * alpha + sum;
    m = mn;
    rescale_output<D>(o, alpha);
    __syncwarp();
    for (int n = 0; n < D / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < kBc / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
        wmma::load_matrix_sync(a, ps + kk * 16, kBc);
        wmma::load_matrix_sync(b, vs + kk * 16 * D + n * 16, D);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(scratch + n * 16, acc, kW, wmma::mem_row_major);
    }
    __syncwarp();
    for (int j = 0; j < D / 2; ++j) o[j] += scratch[r * kW + half * (D / 2) + j];
    __syncwarp();  // the scratch is rewritten by the next tile's scores
  }
  l += __shfl_xor_sync(kl::kFullMask, l, 1);
  if (qi < p.seq) {
    __half* out = p.o + base + static_cast<std::int64_t>(qi) * D + half * (D / 2);
    for (int j = 0; j < D / 2; j += 2) *reinterpret_cast<__half2*>(out + j) = __floats2half2_rn(o[j] / l, o[j + 1] / l);
  }
}

template <int D>
constexpr std::size_t flash_wmma_smem() {
  constexpr int kW = D > kBc ? D : kBc;
  return (kBr + 2 * kBc) * D * 2 + kFlashWarps * 16 * (kW * 4 + kBc * 2);
}

inline void launch_flash_wmma(const Problem& p, Workspace&, cudaStream_t s) {
  if (p.dim == 64) launch_with_smem<flash_wmma<64>>(flash_wmma_smem<64>(), kFlashWarps, p, s);
  else launch_with_smem<flash_wmma<128>>(flash_wmma_smem<128>(), kFlashWarps, p, s);
}

}  // namespace lesson07
