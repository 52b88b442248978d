// Lesson 01, step 2: one thread per element, one atomicAdd per element.
#pragma once
#include <cstddef>

#include "lessons/01_naive_reduction/parts.cuh"

namespace lesson01 {

// Step 2: one thread per element, each adding its value straight into the result. All threads
// read in parallel now, but n atomics on one address queue up one after another in L2.
__global__ void sum_atomic_per_element(const float* x, std::size_t n, float* out) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) atomicAdd(out, x[i]);
}

inline void launch_atomic_per_element(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));  // the atomics accumulate into out
  if (n == 0) return;
  sum_atomic_per_element<<<static_cast<unsigned>((n + kBlock - 1) / kBlock), kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson01
