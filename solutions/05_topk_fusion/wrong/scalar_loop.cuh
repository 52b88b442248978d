// A wrong technique for exercise 05.2, kept to test the grader: step 2 as it is, one 4-byte load
// and one 16-slot insertion per logit. Right, but slow. Prediction from results/h100/lesson05.csv:
// step 2 takes 2.16 ms against step 3's 1.17 ms at 4096 x 50257, k = 10 (f32): about 0.54 of the
// solution's speed. It must fail the speed bar.
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"

template <int KC>
__global__ void __launch_bounds__(32 * lesson05::kWarpsPerBlock)
    topk_warp_vector(const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{lesson05::kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * vocab;
  lesson05::Partial<KC> part;
  for (int c = lane; c < vocab; c += 32) {
    const float v = xr[c];
    lesson05::add_to_sum(part.m, part.s, v);
    lesson05::insert_sorted(part.keys, lesson05::make_key(v, c));
  }
  lesson05::finish_warp(part, k, lane, prob + row * k, idx + row * k);
}
