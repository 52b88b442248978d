// A wrong technique for exercise 06.2, kept to test the grader: step 2 as it is, 32x32 shared tiles
// and one output per thread, two shared-memory loads per FMA. Right, but slow: step 2 takes 15.6 ms
// against step 3's 7.9 ms at 4096^3 on the H100, about 0.51 of the solution's speed: it must fail
// the speed bar.
#pragma once
#include <cstdint>

#include "common/check.cuh"
#include "lessons/06_tiled_gemm/parts.cuh"

constexpr int kT2 = 32;

__global__ void gemm_register_tile(lesson06::Problem p) {
  __shared__ float as[kT2][kT2];
  __shared__ float bs[kT2][kT2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m = blockIdx.y * kT2 + ty, n = blockIdx.x * kT2 + tx;
  float acc = 0.f;
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
