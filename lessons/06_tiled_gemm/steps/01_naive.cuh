// Lesson 06, step 1: one thread per output element.
#pragma once
#include <cstdint>

#include "common/check.cuh"
#include "lessons/06_tiled_gemm/parts.cuh"

namespace lesson06 {

// Each thread walks a row of A and a column of B from global memory: 2 loads per FMA, all from L1/L2.
// D's element goes through Epi: Plain in the step table; gemm() runs the kernel with its Runtime
// epilogue (gemm.cuh) on tiny problems.
template <class Epi>
__global__ void gemm_naive(Problem p) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= p.m || n >= p.n) return;
  const float* a = p.a + std::int64_t{m} * p.lda;
  float acc = 0.f;
  for (int k = 0; k < p.k; ++k) acc = fmaf(a[k], p.b[std::int64_t{k} * p.ldb + n], acc);
  p.d[std::int64_t{m} * p.ldd + n] = Epi::apply(p, acc, m, n);
}

template <class Epi>
void launch_naive(const Problem& p, cudaStream_t s) {
  const dim3 block(16, 16);
  gemm_naive<Epi><<<dim3((p.n + 15) / 16, (p.m + 15) / 16), block, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson06
