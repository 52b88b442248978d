// Exercise 06.2: turn step 2 into step 3 — an 8x8 tile of outputs per thread, in registers.
//
// The kernel and launcher below are lesson 06's step 2: a 32x32 block of threads stages 32x32 tiles
// of A and B in shared memory and each thread computes ONE output, so every FMA costs two
// shared-memory loads. It is right, but the grader finds it about half as fast as the solution
// (step 3: 7.9 ms against 15.6 ms at 4096^3 on the H100), below the bar of 80 % of its speed.
//
// Given (lessons/06_tiled_gemm/parts.cuh): the block tile kBM x kBN x kBK = 128 x 128 x 16, kThreads
// = 256, the thread tile kTM x kTN = 8 x 8, tile_grid(p, bm, bn) (one block per bm x bn tile of D),
// and Plain::apply (alpha·acc + beta·C: what turns an accumulator into D).
//
// TODO:
//   1. Launch kThreads threads per block (a 1-D block), one block per kBM x kBN tile of D.
//   2. Per slice of K, stage a kBM x kBK tile of A and a kBK x kBN tile of B in shared memory: the 256
//      threads load the 2048 elements of each, several each, with zeros past the edges of A and B.
//   3. Thread tid owns the 8x8 outputs at rows (tid / 16) * 8 ... + 7 and columns (tid % 16) * 8 ... + 7
//      of the block tile, accumulated in float acc[kTM][kTN].
//   4. For each kk of the slice, read the thread's 8 A values and 8 B values from shared memory into
//      registers, then add their outer product (64 FMAs) into acc.
//   5. Write the 64 outputs through Plain::apply, leaving out those past M or N.
// Grade it: scripts/grade.sh 06.2
#pragma once
#include <cstdint>

#include "common/check.cuh"
#include "lessons/06_tiled_gemm/parts.cuh"

constexpr int kT2 = 32;  // TODO: the block tile of parts.cuh (kBM x kBN x kBK) instead

__global__ void gemm_register_tile(lesson06::Problem p) {
  __shared__ float as[kT2][kT2];
  __shared__ float bs[kT2][kT2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m = blockIdx.y * kT2 + ty, n = blockIdx.x * kT2 + tx;
  float acc = 0.f;  // TODO: an 8x8 tile of accumulators
  for (int k0 = 0; k0 < p.k; k0 += kT2) {
    as[ty][tx] = m < p.m && k0 + tx < p.k ? p.a[std::int64_t{m} * p.lda + k0 + tx] : 0.f;
    bs[ty][tx] = k0 + ty < p.k && n < p.n ? p.b[std::int64_t{k0 + ty} * p.ldb + n] : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kT2; ++kk) acc = fmaf(as[ty][kk], bs[kk][tx], acc);
    __syncthreads();
  }
  if (m < p.m && n < p.n) p.d[std::int64_t{m} * p.ldd + n] = lesson06::Plain::apply(p, acc, m, n);
}

inline void launch_register_tile(const lesson06::Problem& p, cudaStream_t s) {
  gemm_register_tile<<<dim3((p.n + kT2 - 1) / kT2, (p.m + kT2 - 1) / kT2), dim3(kT2, kT2), 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}
