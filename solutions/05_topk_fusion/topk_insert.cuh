// Exercise 05, solved: the register top-K insertion (see exercises/05_topk_fusion for the task).
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"  // make_key, Partial, add_to_sum, finish_warp

template <int K>
__device__ __forceinline__ void topk_insert_exercise(lesson05::Key (&keys)[K], lesson05::Key key) {
  if (key <= keys[K - 1]) return;  // early reject: not better than the K-th best
    // Walk up from the last slot: while the new key is larger than the slot above, that key moves
    // down one; the first slot whose upper neighbour is larger takes the new key.
#pragma unroll
  for (int j = K - 1; j > 0; --j) keys[j] = key > keys[j - 1] ? keys[j - 1] : (key > keys[j] ? key : keys[j]);
  if (key > keys[0]) keys[0] = key;
}

// One warp per row, f32: each lane folds its logits (c = lane, lane + 32, ...) into its (max, sum)
// and its list, then the warp merges the 32 lists and writes K (probability, index) pairs.
template <int K>
__global__ void topk_exercise(const float* x, std::int64_t rows, int vocab, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{blockDim.x / 32} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % 32;
  lesson05::Partial<K> part;
  for (int c = lane; c < vocab; c += 32) {
    const float v = x[row * vocab + c];
    lesson05::add_to_sum(part.m, part.s, v);
    topk_insert_exercise(part.keys, lesson05::make_key(v, c));
  }
  lesson05::finish_warp(part, K, lane, prob + row * K, idx + row * K);
}
