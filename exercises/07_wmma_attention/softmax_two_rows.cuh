// Exercise 07.1: step 1's softmax micro-kernel turned into step 2's — the whole warp on the 16x16
// score tile.
//
// The reference design (step 1) gives lane c < 16 column c of one row at a time and leaves lanes
// 16-31 idle: 16 passes, each with two 5-step shuffle reductions over the whole warp. Here the warp
// takes two rows per pass: lanes 0-15 the even row 2·pass, lanes 16-31 the odd row 2·pass + 1, each
// half-warp reducing its own row. As written, only the even rows are computed and written; the
// kernel below (given) fills P with NaN first, so the odd rows of every output come out NaN.
//
// TODO:
//   1. Let lanes 16-31 take row 2·pass + 1 (lane / 16 says which half a lane is in).
//   2. Keep the reductions inside each half-warp: __shfl_xor_sync with offsets 8, 4, 2, 1 never
//      crosses from lane < 16 to lane >= 16, so both rows reduce at once in 4 steps (not 5).
//   3. Every lane writes its probability: no lane is idle any more.
// Grade it: scripts/grade.sh 07.1
#pragma once
#include "lessons/07_wmma_attention/attention.cuh"

// s: the tile's 16x16 scores (row-major, float); p: its probabilities softmax(s · scale), in f16.
__device__ __forceinline__ void softmax_two_rows(const float* s, __half* p, float scale) {
  constexpr int kT = lesson07::kT;
  const int lane = threadIdx.x % 32, col = lane % kT;
  for (int pass = 0; pass < kT / 2; ++pass) {
    const int row = 2 * pass;  // TODO: lanes 16-31 take the odd row
    const float x = s[row * kT + col] * scale;
    float m = x;
    for (int o = 8; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(kl::kFullMask, m, o));
    const float e = kl::fast_exp(x - m);
    float sum = e;
    for (int o = 8; o > 0; o /= 2) sum += __shfl_xor_sync(kl::kFullMask, sum, o);
    if (lane < kT) p[row * kT + col] = __float2half_rn(e / sum);  // TODO: every lane writes its row
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
