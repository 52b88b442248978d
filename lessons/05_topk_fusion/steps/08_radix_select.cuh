// Step 8: select with a radix histogram instead of sorting candidates (decode). Step 6 passes its
// candidates through shared-memory buffers and bitonic sorts, and its merge warp sorts 256 keys again
// and again. Here a block holds 4096 keys in registers and finds the k-th largest by its bits, 8 at a
// time from the top (a 256-bin histogram per pass, stopping once the k-th key's bin holds just the
// keys still needed, or ranking the bin's keys once it holds at most 256): every key at or above it wins. The same
// select takes each slice's k best (topk_radix_slices), then the row's k best of theirs (topk_radix_merge); only the
// final k are sorted, by one warp in registers. The block's select (radix_threshold, rank_threshold, keep_winners,
// radix_select, block_stats, write_radix_best) is in parts.cuh.
#pragma once
#include <algorithm>
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// Step 8's geometry: a block per slice of one chunk (a decode row of 128256 logits: 32 slices), but
// at most kRadixChunk / k slices, so that the merge holds all their winners in one chunk. Longer
// rows share their chunks out evenly (slice j starts at chunk j C / S), and a block streams its own.
__host__ __device__ inline int radix_chunks(int vocab) {
  return static_cast<int>((std::int64_t{vocab} + kRadixChunk - 1) / kRadixChunk);
}

inline int radix_slices(int vocab, int k) { return std::min(radix_chunks(vocab), kRadixChunk / k); }

__host__ __device__ inline int radix_first_chunk(int vocab, int slices, int slice) {
  return static_cast<int>(std::int64_t{slice} * radix_chunks(vocab) / slices);
}

// Step 8's first kernel: a block per slice of a row (its chunks of 4096 logits). A chunk's 16 loads
// a thread are all issued before any is used; each thread folds its logits into (m, s). One slice
// per row: the block writes the answer; several: its winners (unsorted, key 0 past the last) and
// (m, s) for topk_radix_merge.
template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    topk_radix_slices(const T* x, int vocab, int k, int slices, float* prob, int* idx, Key* part_keys,
                      float2* part_stats) {
  __shared__ RadixShared sh;
  const std::int64_t row = blockIdx.x / slices;
  const int t = threadIdx.x, slice = static_cast<int>(blockIdx.x % slices);
  const int first = radix_first_chunk(vocab, slices, slice), end = radix_first_chunk(vocab, slices, slice + 1);
  const T* xr = x + row * vocab;
  float m = -INFINITY, s = 0.f;
  radix_select(end - first, k, sh, [&](int c, Key(&keys)[kRadixItems + 1]) {
    // int: a chunk starts before V <= INT_MAX - 8191 (kMaxVocab), so it ends before INT_MAX
    const int at = (first + c) * kRadixChunk + t;
    T raw[kRadixItems];
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i)
      raw[i] = at + i * kBlockThreads < vocab ? xr[at + i * kBlockThreads] : kl::from_float<T>(-INFINITY);
    float v[kRadixItems];
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i) v[i] = kl::to_float(raw[i]);
    add_pack_to_sum(m, s, v);
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i)
      keys[i] = at + i * kBlockThreads < vocab ? make_key(v[i], at + i * kBlockThreads) : 0;
  });
  const kl::MaxSum ms = block_stats(m, s, sh);
  if (slices == 1) {
    if (t < 32) write_radix_best(sh, k, ms, prob + row * k, idx + row * k);
    return;
  }
  if (t < k) part_keys[std::int64_t{blockIdx.x} * k + t] = t < sh.count ? sh.best[t] : 0;
  if (t == 0) part_stats[blockIdx.x] = make_float2(ms.m, ms.s);
}

// The k best of a row's slices' winners (slices * k keys, in chunks of kRadixChunk) into sh.best.
__device__ __forceinline__ void select_slices_best(const Key* part_keys, std::int64_t row, int slices, int k,
                                                   RadixShared& sh) {
  const int t = threadIdx.x, n = slices * k;
  const Key* keys = part_keys + row * n;
  radix_select((n + kRadixChunk - 1) / kRadixChunk, k, sh, [&](int c, Key(&chunk)[kRadixItems + 1]) {
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i) {
      const int at = c * kRadixChunk + i * kBlockThreads + t;
      chunk[i] = at < n ? keys[at] : 0;
    }
  });
}

// Step 8's second kernel: a block per row takes the k best of its slices' winners with the same
// select (one chunk of keys at the slice counts radix_slices picks), combines their (m, s) and
// writes the answer.
__global__ void __launch_bounds__(kBlockThreads)
    topk_radix_merge(const Key* part_keys, const float2* part_stats, int slices, int k, float* prob, int* idx) {
  __shared__ RadixShared sh;
  const std::int64_t row = blockIdx.x;
  const int t = threadIdx.x;
  kl::MaxSum mine{-INFINITY, 0.f};
  for (int sl = t; sl < slices; sl += kBlockThreads)
    mine = kl::combine(mine, {part_stats[row * slices + sl].x, part_stats[row * slices + sl].y});
  select_slices_best(part_keys, row, slices, k, sh);
  const kl::MaxSum ms = block_stats(mine.m, mine.s, sh);
  if (t < 32) write_radix_best(sh, k, ms, prob + row * k, idx + row * k);
}

// Launches topk_radix_slices on `used` slices of every row (at most one a chunk), their scratch sized first.
template <class T>
void launch_radix_slices(const Problem& p, int used, Workspace& ws, cudaStream_t s) {
  if (used > 1) {
    ws.part_keys.resize(static_cast<std::size_t>(p.rows * used * p.k));
    ws.part_stats.resize(static_cast<std::size_t>(p.rows * used));
  }
  topk_radix_slices<T><<<static_cast<unsigned>(p.rows * used), kBlockThreads, 0, s>>>(
      static_cast<const T*>(p.x), p.vocab, p.k, used, p.prob, p.idx, ws.part_keys.data(), ws.part_stats.data());
  CUDA_CHECK_LAUNCH();
}

// Step 8 on `slices` slices of every row (at most one a chunk) and, with more than one, the merge. The
// test also runs other slice counts than radix_slices': slices of several chunks, and merges of several
// chunks of keys.
template <class T>
void run_radix(const Problem& p, int slices, Workspace& ws, cudaStream_t s) {
  const int used = std::min(slices, radix_chunks(p.vocab));
  launch_radix_slices<T>(p, used, ws, s);
  if (used > 1) {
    topk_radix_merge<<<static_cast<unsigned>(p.rows), kBlockThreads, 0, s>>>(ws.part_keys.data(), ws.part_stats.data(),
                                                                             used, p.k, p.prob, p.idx);
    CUDA_CHECK_LAUNCH();
  }
}

inline void launch_radix_select(const Problem& p, Workspace& ws, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) { run_radix<decltype(t)>(p, radix_slices(p.vocab, p.k), ws, s); });
}

}  // namespace lesson05
