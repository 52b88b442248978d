// A wrong technique for exercise 05.1, kept to test the grader: the skeleton's insertion, which
// keeps only the largest key in slot 0 and leaves the other slots empty. Right for k = 1; for k = 5
// the ranks after the first come out as empty keys (index -1): it must fail the check.
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"

template <int KC>
__device__ __forceinline__ void topk_insert(lesson05::Key (&keys)[KC], lesson05::Key key) {
  if (key > keys[0]) keys[0] = key;
}

// The kernel of the exercise, unchanged.
template <int KC>
__global__ void __launch_bounds__(32 * lesson05::kWarpsPerBlock)
    topk_warp_per_row(const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{lesson05::kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * vocab;
  lesson05::Partial<KC> part;
  for (int c = lane; c < vocab; c += 32) {
    const float v = xr[c];
    lesson05::add_to_sum(part.m, part.s, v);
    topk_insert(part.keys, lesson05::make_key(v, c));
  }
  lesson05::finish_warp(part, k, lane, prob + row * k, idx + row * k);
}
