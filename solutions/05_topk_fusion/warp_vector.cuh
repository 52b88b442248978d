// Exercise 05.2, solved: step 2 turned into step 3 (see exercises/05_topk_fusion for the task).
//
// Each lane reads 16 bytes (4 logits) per load, two loads in flight, instead of 4 bytes. A logit
// enters the 16-slot insertion only when it is not below the lane's KC-th best, and one compare of
// a pack's max skips the whole pack, which random logits almost always are once the list is full:
// a warp still inserts whenever any of its 32 lanes must (most of its first ~100 iterations), but
// no longer for every logit. The logits before the row's first 16-byte boundary and after its last
// whole pack are taken one by one: any V, any row start. On the H100 at 4096 x 50257, k = 10:
// ~1.17 ms against step 2's ~2.16 ms.
#pragma once
#include <cstdint>

#include "common/pack.cuh"
#include "lessons/05_topk_fusion/parts.cuh"  // Key, make_key, Partial, add_to_sum, add_pack_to_sum, ...

// One logit, inserted only if it is not below the lane's KC-th best (a NaN is never below).
template <int KC>
__device__ __forceinline__ void take_logit(lesson05::Partial<KC>& part, float v, int i) {
  lesson05::add_to_sum(part.m, part.s, v);
  if (!(v < part.threshold)) {
    lesson05::insert_sorted(part.keys, lesson05::make_key(v, i));
    part.threshold = lesson05::key_value(part.keys[KC - 1]);
  }
}

// Four logits: one max, at most one rescale, four exponentials; one compare of the pack's max
// against the threshold rejects the whole pack, which is what random logits almost always do.
template <int KC>
__device__ __forceinline__ void take_pack(lesson05::Partial<KC>& part, const float (&v)[4], int i0) {
  const float pm = lesson05::add_pack_to_sum(part.m, part.s, v);
  if (!(pm < part.threshold)) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (!(v[i] < part.threshold)) {
        lesson05::insert_sorted(part.keys, lesson05::make_key(v[i], i0 + i));
        part.threshold = lesson05::key_value(part.keys[KC - 1]);
      }
    }
  }
}

// Step 3, f32: each lane folds its share of the row into its (max, sum) and its list of KC keys,
// then the warp merges the 32 lists and writes k (probability, index) pairs, k <= KC.
template <int KC>
__global__ void __launch_bounds__(32 * lesson05::kWarpsPerBlock)
    topk_warp_vector(const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{lesson05::kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * vocab;
  lesson05::Partial<KC> part;
  const kl::PackSplit<4, float, int> split(xr, vocab);  // head, whole 16-byte packs, tail
  if (lane < split.head) take_logit(part, xr[lane], lane);
  const int body = split.head;
  int q = lane;
  for (; q + 32 < split.packs; q += 64) {  // two loads in flight
    float a[4], b[4];
    kl::load_pack<4>(xr + body + q * 4, a);
    kl::load_pack<4>(xr + body + (q + 32) * 4, b);
    take_pack(part, a, body + q * 4);
    take_pack(part, b, body + (q + 32) * 4);
  }
  if (q < split.packs) {
    float a[4];
    kl::load_pack<4>(xr + body + q * 4, a);
    take_pack(part, a, body + q * 4);
  }
  const int tail = body + split.packs * 4;
  if (lane < split.tail) take_logit(part, xr[tail + lane], tail + lane);
  lesson05::finish_warp(part, k, lane, prob + row * k, idx + row * k);
}
