// Step 6: a row split over blocks, for few long rows (decode): step 5's block on each slice writes the
// slice's k best keys and (m, s), and a second kernel merges the slices of each row.
#pragma once
#include <algorithm>
#include <cstdint>

#include "common/device.cuh"
#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// Step 6's second kernel: one warp (one block) per row streams the slices' sorted lists through a
// selection and combines the slices' (m, s). A block of one warp, so that a decode batch of 8 rows
// runs on 8 SMs rather than sharing one SM's shared memory.
constexpr int kMergeCap = 256;

__global__ void __launch_bounds__(32)
    topk_merge_slices(const Key* part_keys, const float2* part_stats, int slices, int k, float* prob, int* idx) {
  __shared__ Key buffer[kMergeCap];
  const std::int64_t row = blockIdx.x;
  const int lane = threadIdx.x;
  float m = -INFINITY, s = 0.f;
  for (int sl = lane; sl < slices; sl += 32) {
    const kl::MaxSum r = kl::combine({m, s}, {part_stats[row * slices + sl].x, part_stats[row * slices + sl].y});
    m = r.m;
    s = r.s;
  }
  warp_stats(m, s);
  Selection sel{buffer, kMergeCap};
  select_from_lists(sel, part_keys + row * slices * k, slices, k, k, lane);
  write_best(sel.buf, k, lane, m, s, prob + row * k, idx + row * k);
}

// Step 6's geometry: about two blocks per SM in all (a decode batch of 8 rows gets 33 slices of a
// 128k row). A slice holds at least max(256, 32 K) logits, so that the slices' winners, which the
// second kernel reads again (8 bytes per key), stay below a quarter of the row's bytes.
constexpr int kMinSlice = 256;

inline int slice_count(std::int64_t rows, int vocab, int k, int sms) {
  const std::int64_t wanted = (2 * std::int64_t{sms} + rows - 1) / std::max<std::int64_t>(rows, 1);
  const int most = std::min(1024, std::max(1, vocab / std::max(kMinSlice, 32 * k)));
  return static_cast<int>(std::clamp<std::int64_t>(wanted, std::min(2, most), most));
}

inline int slice_length(int vocab, int slices) {
  const std::int64_t per = (std::int64_t{vocab} + slices - 1) / slices;  // 64-bit: V + slices - 1 may pass INT_MAX
  return static_cast<int>((per + 7) / 8 * 8);
}

// Launches topk_block on `slices` slices of every row and, when more than one is used, the merge.
template <class T>
void run_block(const Problem& p, int slices, Workspace& ws, cudaStream_t s) {
  const int slice = slice_length(p.vocab, slices);
  // rounding the slice up may leave the last one empty; 64-bit: V + slice - 1 may pass INT_MAX
  const auto used = static_cast<int>((std::int64_t{p.vocab} + slice - 1) / slice);
  if (used > 1) {
    ws.part_keys.resize(static_cast<std::size_t>(p.rows * used * p.k));
    ws.part_stats.resize(static_cast<std::size_t>(p.rows * used));
  }
  const auto blocks = static_cast<unsigned>(p.rows * used);
  with_bound(p.k, [&](auto bound) {
    topk_block<T, bound><<<blocks, kBlockThreads, 0, s>>>(static_cast<const T*>(p.x), p.vocab, p.k, used, slice, p.prob,
                                                          p.idx, ws.part_keys.data(), ws.part_stats.data());
  });
  CUDA_CHECK_LAUNCH();
  if (used > 1) {
    topk_merge_slices<<<static_cast<unsigned>(p.rows), 32, 0, s>>>(ws.part_keys.data(), ws.part_stats.data(), used, p.k,
                                                                   p.prob, p.idx);
    CUDA_CHECK_LAUNCH();
  }
}

inline void launch_split_row(const Problem& p, Workspace& ws, cudaStream_t s) {
  const int slices = slice_count(p.rows, p.vocab, p.k, kl::sm_count());
  with_type(p.dtype, [&](auto t) { run_block<decltype(t)>(p, slices, ws, s); });
}

}  // namespace lesson05
