// Step 4: one threshold and one candidate buffer per warp. The selection it introduces (Selection,
// keep_best, radix_keep, append, offer_pack, scan_select, write_best) and the bitonic warp sort it
// uses are in parts.cuh, since steps 5 and 6 keep them.
#pragma once
#include <cstdint>

#include "common/pack.cuh"
#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// Step 3's early reject is per lane: each of the 32 lanes fills its own list first and keeps a
// threshold that only its own logits raise, and a warp inserts whenever any one lane must. Step 4
// keeps the K best of the whole warp instead: logits not below the warp's K-th best so far are
// appended to a buffer in shared memory (a ballot gives each lane its slot), and when the buffer
// fills, the warp keeps its K best, which raises the threshold for all 32 lanes at once: for K > 16 by
// a radix select over the keys' bits (radix_keep: a few histogram passes, where a bitonic sort of 512
// keys takes 45 stages), for K <= 16 by a sort (rare there: the lanes' maxima raise the threshold).
// For random logits a row of 50257 sends only ~K ln(V / K) candidates through the buffer.

// Step 3's kernel with one K-best selection per warp: one threshold for all 32 lanes, rarely crossed,
// so almost every pack costs a vote and nothing more. At most 64 registers, so that 4 blocks (32
// rows) fit on an SM: R = 4096 rows run in one wave.
template <class T, bool kBound>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, 4)
    topk_warp_select(const T* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  constexpr bool kRadix = !kBound;  // past kMaximaK the buffer's K best are kept by radix_keep, not sorted
  __shared__ Key buffers[kWarpsPerBlock * kCap<T>];
  __shared__ alignas(16) unsigned hists[kRadix ? kWarpsPerBlock * 256 : 1];  // radix_keep's histograms
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t row = blockIdx.x * std::int64_t{kWarpsPerBlock} + warp;
  if (row >= rows) return;  // the whole warp leaves together
  Selection sel{buffers + warp * kCap<T>, kCap<T>};
  sel.hist = hists + (kRadix ? warp * 256 : 0);
  float m = -INFINITY, s = 0.f;
  scan_select<kBound, kRadix>(x + row * vocab, 0, vocab, lane, 32, m, s, sel, k, lane);
  keep_best(sel, k, lane);
  warp_stats(m, s);
  write_best(sel.buf, k, lane, m, s, prob + row * k, idx + row * k);
}

inline void launch_warp_select(const Problem& p, Workspace&, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_bound(p.k, [&](auto bound) {
      topk_warp_select<T, bound><<<warp_grid(p.rows), 32 * kWarpsPerBlock, 0, s>>>(static_cast<const T*>(p.x), p.rows,
                                                                                   p.vocab, p.k, p.prob, p.idx);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
