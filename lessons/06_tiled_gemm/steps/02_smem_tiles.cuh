// Lesson 06, step 2: shared-memory tiles.
#pragma once
#include <cstdint>

#include "common/check.cuh"
#include "lessons/06_tiled_gemm/parts.cuh"

namespace lesson06 {

constexpr int kT2 = 32;

// A 32x32 block stages 32x32 tiles of A and B in shared memory (coalesced loads, zero past the edges):
// each value loaded from global memory is used 32 times (step 1: once).
__global__ void gemm_smem_tiles(Problem p) {
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
  if (m < p.m && n < p.n) p.d[std::int64_t{m} * p.ldd + n] = Plain::apply(p, acc, m, n);
}

inline void launch_smem_tiles(const Problem& p, cudaStream_t s) {
  gemm_smem_tiles<<<dim3((p.n + kT2 - 1) / kT2, (p.m + kT2 - 1) / kT2), dim3(kT2, kT2), 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson06
