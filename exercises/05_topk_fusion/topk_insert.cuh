// Exercise 05.1: the register top-K insertion — the heart of step 2 (and of steps 3 to 5), which
// keeps each thread's K best logits in registers while the row streams past once.
//
// A thread's list is KC keys sorted largest first (lesson05::make_key packs a logit and its index
// into one 64-bit key: a larger key is a larger logit, or the same logit at a lower index; key 0 is
// an empty slot, smaller than any real key). topk_insert gets the list and one new key and must
// leave the KC largest of (list + key) in the list, still sorted. The kernel below (given: step 2,
// one warp per row) calls it for every logit, then merges the 32 lanes' lists and writes the k best.
// As written it keeps only the maximum, which is right for k = 1 and wrong for anything more.
//
// TODO: write the insertion.
//   1. Early reject: a key not larger than the last (KC-th) key cannot enter; return at once.
//   2. Shift down: every key smaller than the new one moves one slot down (the last one falls off),
//      and the new key takes the slot that opens.
//   3. Keep every index into `keys` a compile-time constant (loops with #pragma unroll over j, no
//      `keys[pos]` with a pos found at run time), so that the list stays in registers: slot j ends
//      up holding keys[j - 1], the new key, or its own key, whichever the order says.
// Grade it: scripts/grade.sh 05.1
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"  // Key, make_key, Partial, add_to_sum, finish_warp

template <int KC>
__device__ __forceinline__ void topk_insert(lesson05::Key (&keys)[KC], lesson05::Key key) {
  if (key > keys[0]) keys[0] = key;  // TODO: keeps only the maximum; insert into the sorted list
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
