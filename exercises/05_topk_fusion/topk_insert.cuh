// Exercise 05: the register top-K insertion — the heart of steps 2-5, which keep each thread's K
// best logits in registers while the row streams past once.
//
// A thread's list is K keys sorted largest first (lesson05::make_key packs a logit and its index
// into one 64-bit key: a larger key is a larger logit, or the same logit at a lower index; key 0 is
// an empty slot, smaller than any real key). topk_insert_exercise gets the list and one new key and
// must leave the K largest of (list + key) in the list, still sorted. The kernel below (given: one
// warp per row) calls it for every logit, then merges the 32 lanes' lists and writes K results.
// As written it keeps only the maximum, which is right for K = 1 and wrong for anything more.
//
// TODO: write the insertion.
//   1. Early reject: a key not larger than the last (K-th) key cannot enter; return at once. For
//      random logits this is almost every key once the list is full: that is what makes step 3 fast.
//   2. Shift down: every key smaller than the new one moves one slot down (the last one falls off),
//      and the new key takes the slot that opens.
//   3. Keep every index into `keys` a compile-time constant (loops with #pragma unroll over j, no
//      `keys[pos]` with a pos found at run time), or the list leaves the registers for local memory:
//      slot j ends up holding keys[j - 1], the new key, or its own key, whichever the order says.
// Then: cmake --build --preset release && ctest --preset exercises
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"  // make_key, Partial, add_to_sum, finish_warp

template <int K>
__device__ __forceinline__ void topk_insert_exercise(lesson05::Key (&keys)[K], lesson05::Key key) {
  if (key > keys[0]) keys[0] = key;  // TODO: keeps only the maximum; insert into the sorted list
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
