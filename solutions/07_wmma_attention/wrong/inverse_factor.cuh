// A wrong technique for exercise 07.2, kept to test the grader: l and o are rescaled by the inverse
// factor e^(m_new - m_old) >= 1, so old terms grow where they should shrink; on the first tile
// (m_old = -inf) the factor is inf and 0 · inf makes every output NaN. It must fail the check.
#pragma once
#include "lessons/07_wmma_attention/attention.cuh"

template <int N>
__host__ __device__ __forceinline__ void rescale_row(float& l, float (&o)[N], float m_old, float m_new) {
  const float alpha = kl::fast_exp(m_new - m_old);
  l *= alpha;
#pragma unroll
  for (int j = 0; j < N; ++j) o[j] *= alpha;
}

// Given: step 5's kernel (lessons/07_wmma_attention/steps/05_flash_wmma.cuh), which calls the function
// above once per key tile, after the tile's probabilities and before its P·V is added to o.
template <int D>
__global__ void __launch_bounds__(lesson07::kFlashWarps * 32) flash_wmma(lesson07::Problem p) {
  using namespace lesson07;  // kBr, kBc, kFlashWarps, load_rows, flash_block, key_tiles, wmma
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
    float sum = 0;
    for (int j = 0; j < kBc / 2; ++j) {
      const float e = kl::exp2_approx(sv[j] * c - mc);  // e^(scale·(s - new max))
      sum += e;
      ps[r * kBc + half * (kBc / 2) + j] = __float2half_rn(e);
    }
    rescale_row(l, o, m * p.scale, mn == -INFINITY ? 0.f : mn * p.scale);  // the row's max: m -> mn
    l += sum;
    m = mn;
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
