// Step 2: fused, one warp per row. The pieces it introduces that later steps keep (the 64-bit keys,
// insert_sorted, Partial, add_to_sum, finish_warp's warp merge) are in parts.cuh.
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// One read of the row: each lane folds its logits (c = lane, lane + 32, ...) into its (m, s) and its
// sorted list, then the warp merges. Bytes drop to one read, but every logit pays a KC-long insertion.
template <class T, int KC>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    topk_warp_per_row(const T* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % 32;
  const T* xr = x + row * vocab;
  Partial<KC> part;
  for (int c = lane; c < vocab; c += 32) {
    const float v = kl::to_float(xr[c]);
    add_to_sum(part.m, part.s, v);
    insert_sorted(part.keys, make_key(v, c));
  }
  finish_warp(part, k, lane, prob + row * k, idx + row * k);
}

inline void launch_warp_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_kc(p.k, [&](auto kc) {
      topk_warp_per_row<T, kc()><<<warp_grid(p.rows), 32 * kWarpsPerBlock, 0, s>>>(static_cast<const T*>(p.x), p.rows,
                                                                                   p.vocab, p.k, p.prob, p.idx);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
