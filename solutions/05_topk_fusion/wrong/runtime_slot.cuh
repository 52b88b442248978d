// A wrong technique for exercise 05.1, kept to test the grader: a right insertion sort that finds
// the new key's slot at run time and writes keys[pos]. An index known only at run time cannot name
// a register, so the whole list moves to local memory (L1): the early reject loads keys[KC - 1]
// for every logit, and an insertion is a loop of dependent loads and stores.
// Prediction (from its SASS for sm_90; not measured): at 4096 x 50257, k = 10 (a list of 16), a
// warp runs the insertion in most of its iterations early in the row (any of its 32 lanes may need
// it). The solution's insertion is ~120 independent register instructions; here it is up to 15
// dependent steps of an L1 load, a compare and a store (~35 cycles and 512 bytes of L1 traffic per
// step and warp), and every logit's early reject loads keys[15] from L1 too. About 0.7 of the
// solution's speed, somewhere between 0.5 and 0.9. Measured on the H100: 0.50 (the table of wrong
// techniques in exercises/README.md), well below the bar.
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"

template <int KC>
__device__ __forceinline__ void topk_insert(lesson05::Key (&keys)[KC], lesson05::Key key) {
  if (key <= keys[KC - 1]) return;
  int pos = KC - 1;
  while (pos > 0 && keys[pos - 1] < key) {
    keys[pos] = keys[pos - 1];
    --pos;
  }
  keys[pos] = key;
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
