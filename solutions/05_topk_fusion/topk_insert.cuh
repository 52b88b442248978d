// Exercise 05.1, solved: the register top-K insertion (see exercises/05_topk_fusion for the task).
//
// Slot j takes its upper neighbour when the new key goes above that neighbour, the new key when it
// falls between the two, or keeps its own key: one select per slot, no branch, and every index a
// compile-time constant, so the list lives in KC register pairs. Once the list is full, the early
// reject turns almost every logit of a random row away with a single compare against the KC-th key.
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"  // Key, make_key, Partial, add_to_sum, finish_warp

template <int KC>
__device__ __forceinline__ void topk_insert(lesson05::Key (&keys)[KC], lesson05::Key key) {
  if (key <= keys[KC - 1]) return;  // early reject: not better than the KC-th best
    // Walk up from the last slot: while the new key is larger than the slot above, that key moves
    // down one; the first slot whose upper neighbour is larger takes the new key.
#pragma unroll
  for (int j = KC - 1; j > 0; --j) keys[j] = key > keys[j - 1] ? keys[j - 1] : (key > keys[j] ? key : keys[j]);
  if (key > keys[0]) keys[0] = key;
}

// Step 2, f32: each lane folds its logits (c = lane, lane + 32, ...) into its (max, sum) and its
// list of KC keys, then the warp merges the 32 lists and writes k (probability, index) pairs, k <= KC.
template <int KC>
__global__ void __launch_bounds__(32 * lesson05::kWarpsPerBlock)
    topk_warp_per_row(const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{lesson05::kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
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
