// A wrong technique for exercise 05.2, kept to test the grader: the 16-byte loads and the early
// reject are right, and the packs start on a 16-byte boundary, but the logits before the first
// boundary (the head) and after the last whole pack (the tail) are never read. A row shorter than 4
// logits has no pack at all, and with V = 33 or 50257 most rows lose a few logits; rising logits put
// the largest in the tail: it must fail the check.
#pragma once
#include <cstdint>

#include "common/pack.cuh"
#include "lessons/05_topk_fusion/parts.cuh"

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

template <int KC>
__global__ void __launch_bounds__(32 * lesson05::kWarpsPerBlock)
    topk_warp_vector(const float* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{lesson05::kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * vocab;
  lesson05::Partial<KC> part;
  const kl::PackSplit<4, float, int> split(xr, vocab);
  const int body = split.head;  // the head's logits are skipped, and so are the tail's
  for (int q = lane; q < split.packs; q += 32) {
    float a[4];
    kl::load_pack<4>(xr + body + q * 4, a);
    take_pack(part, a, body + q * 4);
  }
  lesson05::finish_warp(part, k, lane, prob + row * k, idx + row * k);
}
