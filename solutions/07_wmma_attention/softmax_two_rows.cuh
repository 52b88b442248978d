// Exercise 07, solved: step 2's softmax with lanes 16-31 on the odd rows (see exercises/07_wmma_attention).
#pragma once
#include "lessons/07_wmma_attention/attention.cuh"

__device__ __forceinline__ void softmax_two_rows_exercise(const float* s, __half* p, float scale) {
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

// Given: step 2 with the exercise's softmax, P filled with NaN before it so a row left out shows.
__global__ void tile_exercise(lesson07::Problem pr) {
  constexpr int kT = lesson07::kT;
  __shared__ float s[kT * kT];
  __shared__ __half p[kT * kT];
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * kT * kT;
  for (int i = threadIdx.x; i < kT * kT; i += 32) p[i] = __float2half(NAN);
  lesson07::tile_scores(pr.q + off, pr.k + off, s);
  __syncwarp();
  softmax_two_rows_exercise(s, p, pr.scale);
  __syncwarp();
  lesson07::tile_output(p, pr.v + off, s, pr.o + off);
}
