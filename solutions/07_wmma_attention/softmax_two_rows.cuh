// Exercise 07.1, solved: step 1's softmax turned into step 2's (see exercises/07_wmma_attention).
//
// Lanes 0-15 take the even row of each pair and lanes 16-31 the odd one. A __shfl_xor_sync with
// offset 8, 4, 2 or 1 pairs lanes of the same half-warp, so the two rows reduce side by side: 8
// passes of two 4-step reductions instead of 16 passes of two 5-step ones, and no lane idle. The
// tile is small enough that this latency-bound loop is most of the kernel: 0.067 ms against step 1's
// 0.114 ms for 65536 tiles on the H100.
#pragma once
#include "lessons/07_wmma_attention/attention.cuh"

__device__ __forceinline__ void softmax_two_rows(const float* s, __half* p, float scale) {
  constexpr int kT = lesson07::kT;
  const int lane = threadIdx.x % 32, col = lane % kT;
  for (int pass = 0; pass < kT / 2; ++pass) {
    const int row = 2 * pass + lane / kT;  // lanes 16-31: the odd row
    const float x = s[row * kT + col] * scale;
    float m = x;
    for (int o = 8; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(kl::kFullMask, m, o));
    const float e = kl::fast_exp(x - m);
    float sum = e;
    for (int o = 8; o > 0; o /= 2) sum += __shfl_xor_sync(kl::kFullMask, sum, o);
    p[row * kT + col] = __float2half_rn(e / sum);
  }
}

// Given: step 2 (one warp per 16x16x16 tile) with the softmax above, P filled with NaN before it so
// that a row left out shows.
__global__ void tile_all_lanes(lesson07::Problem pr) {
  constexpr int kT = lesson07::kT;
  __shared__ float s[kT * kT];
  __shared__ __half p[kT * kT];
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * kT * kT;
  for (int i = threadIdx.x; i < kT * kT; i += 32) p[i] = __float2half(NAN);
  lesson07::tile_scores(pr.q + off, pr.k + off, s);
  __syncwarp();
  softmax_two_rows(s, p, pr.scale);
  __syncwarp();
  lesson07::tile_output(p, pr.v + off, s, pr.o + off);
}
