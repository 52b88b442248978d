// A wrong technique for exercise 03.2, kept to test the grader: step 4, two elements per thread
// (one block per 512 elements, each thread adds x[i] and x[i + 256] as it loads them). Right, but the
// grid still grows with n and each block's tree is paid for 512 elements: step 4 takes 0.174 ms
// against step 7's 0.0936 ms at 2^26 floats on the H100 (less the lesson's second pass on both
// sides, which the grader does not time): about 0.55 of the solution's speed. It must fail the speed bar.
#pragma once
#include <cstddef>

inline unsigned grid_many_per_thread(std::size_t n) { return n > 512 ? static_cast<unsigned>((n + 511) / 512) : 1; }

__global__ void reduce_many_per_thread(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * (2 * std::size_t{blockDim.x}) + tid;
  float v = i < n ? x[i] : 0.f;
  if (i + blockDim.x < n) v += x[i + blockDim.x];
  s[tid] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}
