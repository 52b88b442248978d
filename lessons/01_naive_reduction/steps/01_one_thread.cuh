// Lesson 01, step 1: one thread sums all n floats.
#pragma once
#include <cstddef>

#include "lessons/01_naive_reduction/parts.cuh"

namespace lesson01 {

// Step 1: a single thread reads all n values. Correct, and as slow as a GPU can be: one of
// ~270,000 possible threads works, and every load waits for the one before it to be added.
__global__ void sum_one_thread(const float* x, std::size_t n, float* out) {
  float s = 0.f;
  for (std::size_t i = 0; i < n; ++i) s += x[i];
  *out = s;
}

inline void launch_one_thread(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  sum_one_thread<<<1, 1, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson01
