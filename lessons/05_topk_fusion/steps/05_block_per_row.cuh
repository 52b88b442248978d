// Step 5: a block per row. Its 8 warps each run step 4's selection on a share of the row, then warp 0
// merges their 8 lists with one more selection (select_from_lists). Step 6 splits a row over several
// of these blocks.
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"
#include "lessons/05_topk_fusion/steps/04_warp_select.cuh"

namespace lesson05 {

// Streams `lists` sorted lists of k keys (list l at keys + l * stride; key 0: none) through an
// empty selection. The largest of the lists' k-th keys seeds the threshold (that list alone holds k
// keys at least as large), so most keys are rejected before they reach the buffer. The keys are
// read kBatch per lane at a time, so that their latency is paid once per 256 keys.
__device__ __forceinline__ void select_from_lists(Selection& sel, const Key* keys, int lists, int stride, int k,
                                                  int lane) {
  Key kth = 0;
  for (int l = lane; l < lists; l += 32) kth = max(kth, keys[static_cast<std::int64_t>(l) * stride + k - 1]);
  for (int offset = 16; offset > 0; offset /= 2) kth = max(kth, __shfl_xor_sync(kl::kFullMask, kth, offset));
  if (kth != 0) sel.threshold = key_value(kth);
  constexpr int kBatch = 8;
  const int total = lists * k;
  for (int base = 0; base < total; base += 32 * kBatch) {
    Key batch[kBatch];
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      const int c = base + 32 * r + lane;
      batch[r] = c < total ? keys[static_cast<std::int64_t>(c / k) * stride + c % k] : 0;
    }
    __syncwarp();  // in a block the lists sit in shared memory, where the appends below write
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      if (sel.count > sel.cap - 32) keep_best(sel, k, lane);
      append(sel, batch[r] != 0 && !(key_value(batch[r]) < sel.threshold), batch[r], lane);
    }
  }
  keep_best(sel, k, lane);
}

constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / 32;

// One block folds a slice of a row (slice = the whole row for step 5): each of its 8 warps selects
// as in step 4, then warp 0 streams the 8 warps' sorted lists through one more selection. With
// one slice per row the block writes the answer; with several it writes the slice's k best keys
// and (m, s) for topk_merge_slices. 8 warps on one row keep enough loads in flight when rows are few.
template <class T>
__global__ void __launch_bounds__(kBlockThreads, 4)
    topk_block(const T* x, int vocab, int k, int slices, int slice, float* prob, int* idx, Key* part_keys,
               float2* part_stats) {
  __shared__ Key buffers[kBlockWarps * kCap<T>];
  __shared__ float2 warp_ms[kBlockWarps];
  const std::int64_t row = blockIdx.x / slices;
  const int begin = static_cast<int>(blockIdx.x % slices) * slice, end = min(vocab, begin + slice);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  Selection sel{buffers + warp * kCap<T>, kCap<T>};
  float m = -INFINITY, s = 0.f;
  scan_select(x + row * vocab, begin, end, static_cast<int>(threadIdx.x), kBlockThreads, m, s, sel, k, lane);
  keep_best(sel, k, lane);  // the warp's k best (key 0 where it saw fewer) at the front of its buffer
  warp_stats(m, s);
  if (lane == 0) warp_ms[warp] = make_float2(m, s);
  __syncthreads();
  if (warp != 0) return;
  // Warp 0 streams the 8 lists through a selection in its own buffer: it has read its own list
  // before it appends, and the room check keeps its appends out of the other warps' buffers.
  Selection block{buffers, kCap<T>};
  select_from_lists(block, buffers, kBlockWarps, kCap<T>, k, lane);
  m = lane < kBlockWarps ? warp_ms[lane].x : -INFINITY;
  s = lane < kBlockWarps ? warp_ms[lane].y : 0.f;
  warp_stats(m, s);
  if (slices == 1) {
    write_best(buffers, k, lane, m, s, prob + row * k, idx + row * k);
    return;
  }
  for (int j = lane; j < k; j += 32) part_keys[static_cast<std::int64_t>(blockIdx.x) * k + j] = buffers[j];
  if (lane == 0) part_stats[blockIdx.x] = make_float2(m, s);
}

inline void launch_block_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    // one slice, the whole row: the block writes the answer, so the slices' buffers are not needed
    topk_block<T><<<static_cast<unsigned>(p.rows), kBlockThreads, 0, s>>>(static_cast<const T*>(p.x), p.vocab, p.k, 1,
                                                                          p.vocab, p.prob, p.idx, nullptr, nullptr);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
