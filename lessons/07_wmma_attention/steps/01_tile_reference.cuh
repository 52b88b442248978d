// Lesson 07, step 1 (tile part): the reference design. One warp per 16×16×16 tile and one warp per
// block: S = QKᵀ by WMMA into shared memory (tile_scores, parts.cuh), a softmax micro-kernel on it,
// O = PV by WMMA (tile_output, parts.cuh).
#pragma once
#include "lessons/07_wmma_attention/parts.cuh"

namespace lesson07 {

// The softmax micro-kernel of the reference: lane c < 16 owns column c, lanes 16-31 idle, the 16
// rows one after another, each with a 5-step shuffle max and a 5-step shuffle sum over the warp.
__device__ __forceinline__ void softmax_rows_half_warp(const float* s, __half* p, float scale) {
  const int lane = threadIdx.x % 32;
  for (int row = 0; row < kT; ++row) {
    const float x = lane < kT ? s[row * kT + lane] * scale : -INFINITY;
    float m = x;
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(kl::kFullMask, m, o));
    const float e = lane < kT ? kl::fast_exp(x - m) : 0.f;
    float sum = e;
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(kl::kFullMask, sum, o);
    if (lane < kT) p[row * kT + lane] = __float2half_rn(e / sum);
  }
}

// Step 1: WMMA for both products, the scores and probabilities in shared memory, half the warp idle
// in the softmax.
__global__ void tile_reference(Problem pr) {
  __shared__ float s[kT * kT];
  __shared__ __half p[kT * kT];
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * kT * kT;
  tile_scores(pr.q + off, pr.k + off, s);
  __syncwarp();
  softmax_rows_half_warp(s, p, pr.scale);
  __syncwarp();
  tile_output(p, pr.v + off, s, pr.o + off);
}

inline void launch_tile_reference(const Problem& p, Workspace&, cudaStream_t s) {
  tile_reference<<<static_cast<unsigned>(p.batch), 32, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson07
