// Step 8: select with a radix histogram instead of sorting candidates (decode). Step 6 passes its
// candidates through shared-memory buffers and bitonic sorts, and its merge warp sorts 256 keys again
// and again. Here a block holds 4096 keys in registers and finds the k-th largest by its bits, 8 at a
// time from the top (a 256-bin histogram per pass, 2 or 3 passes for random logits): every key at or
// above it wins. The same select takes each slice's k best (topk_radix_slices), then the row's k best
// of theirs (topk_radix_merge); only the final k are sorted, by one warp in registers.
#pragma once
#include <algorithm>
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// A block of 256 threads holds kRadixItems keys a thread: a chunk of 4096 logits (or keys) per select.
constexpr int kRadixItems = 16;
constexpr int kRadixChunk = kRadixItems * kBlockThreads;

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

// A block's selection in shared memory: two histograms (a pass fills one while the next is zeroed),
// the prefix of the k-th key found so far, and the winners.
struct RadixShared {
  alignas(16) unsigned hist[2][256];
  Key prefix;
  int done, count;
  Key best[kMaxK];
  float2 warp_ms[kBlockWarps];
};

// The threshold of the block's k best keys: exactly min(k, non-empty keys) are >= it (key 0, empty,
// is never counted). Pass by pass from the top 8 bits, the keys that match the prefix add their next
// digit to a histogram (the lanes of a warp with the same digit add once: normal logits crowd a few
// bins), and warp 0 finds the bin of the k-th key, counting from the top. It stops when that bin
// holds just the keys still needed: the keys are distinct, so by the 8th pass.
template <int N>
__device__ Key radix_threshold(const Key (&keys)[N], int k, RadixShared& sh) {
  const int t = threadIdx.x, lane = t % 32;
  sh.hist[0][t] = 0;
  Key prefix = 0;
  unsigned need = k;  // in warp 0: the keys still needed in the prefix's bin
  __syncthreads();
  for (int pass = 0, shift = 56;; ++pass, shift -= 8) {
    unsigned* hist = sh.hist[pass % 2];
    sh.hist[(pass + 1) % 2][t] = 0;  // for the next pass (warp 0 read it before the last sync)
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const bool in = keys[i] != 0 && (shift == 56 || (keys[i] >> (shift + 8)) == (prefix >> (shift + 8)));
      if (!__any_sync(kl::kFullMask, in)) continue;
      const unsigned digit = in ? static_cast<unsigned>(keys[i] >> shift) & 255u : 256u;
      const unsigned peers = __match_any_sync(kl::kFullMask, digit);
      if (in && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
    }
    __syncthreads();
    if (t < 32) {  // lane l holds bins 8l ... 8l + 7; the keys above its bins are in the lanes above
      const uint4* four = reinterpret_cast<const uint4*>(hist) + 2 * lane;  // 2 loads, 2-way bank conflicts
      const uint4 lo = four[0], hi = four[1];
      const unsigned h[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      const unsigned own = h[0] + h[1] + h[2] + h[3] + h[4] + h[5] + h[6] + h[7];
      unsigned upto = own;  // keys in this lane's bins and above
      for (int offset = 1; offset < 32; offset *= 2) {
        const unsigned up = __shfl_down_sync(kl::kFullMask, upto, offset);
        if (lane + offset < 32) upto += up;
      }
      const bool here = upto - own < need && need <= upto;  // in one lane, unless fewer than need keys
      unsigned above = upto - own, count = 0;               // in that lane: the keys above the bin, and in it
      int bin = -1;
#pragma unroll
      for (int j = 7; j >= 0; --j) {  // down the lane's bins to the one where the count reaches need
        const bool hit = bin < 0 && above + h[j] >= need;
        above += bin < 0 && !hit ? h[j] : 0;
        bin = hit ? 8 * lane + j : bin;
        count = hit ? h[j] : count;
      }
      const int src = __ffs(__ballot_sync(kl::kFullMask, here)) - 1;
      Key next = 1;  // fewer than k keys (first pass only): threshold 1 takes every non-empty one
      if (src >= 0) {
        count = __shfl_sync(kl::kFullMask, count, src);
        need -= __shfl_sync(kl::kFullMask, above, src);
        next = prefix | Key(__shfl_sync(kl::kFullMask, bin, src)) << shift;
      }
      if (lane == 0) {
        sh.prefix = next;
        sh.done = src < 0 || count == need;
        sh.count = 0;  // keep_winners counts from 0
      }
    }
    __syncthreads();
    prefix = sh.prefix;
    if (sh.done) return max(prefix, Key{1});  // -inf's keys start with a digit 0, and empty keys are 0
  }
}

// Puts the block's keys >= threshold in sh.best[0, sh.count), in any order.
template <int N>
__device__ void keep_winners(const Key (&keys)[N], Key threshold, RadixShared& sh) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (keys[i] >= threshold) sh.best[atomicAdd(&sh.count, 1)] = keys[i];
  __syncthreads();
}

// The k best keys of `chunks` chunks, left in sh.best[0, sh.count): fill(c, keys) puts this thread's
// kRadixItems keys of chunk c in keys; the winners of the chunks before ride along as one more key
// in the first k threads.
template <class Fill>
__device__ void radix_select(int chunks, int k, RadixShared& sh, Fill&& fill) {
  for (int c = 0; c < chunks; ++c) {
    Key keys[kRadixItems + 1];
    keys[kRadixItems] = c > 0 && static_cast<int>(threadIdx.x) < sh.count ? sh.best[threadIdx.x] : 0;
    fill(c, keys);
    keep_winners(keys, radix_threshold(keys, k, sh), sh);
  }
}

// The block's (m, s), in warp 0: each warp's state through shared memory, then warp_stats over the 8.
__device__ __forceinline__ kl::MaxSum block_stats(float m, float s, RadixShared& sh) {
  const int lane = threadIdx.x % 32;
  warp_stats(m, s);
  if (lane == 0) sh.warp_ms[threadIdx.x / 32] = make_float2(m, s);
  __syncthreads();
  m = lane < kBlockWarps ? sh.warp_ms[lane].x : -INFINITY;
  s = lane < kBlockWarps ? sh.warp_ms[lane].y : 0.f;
  warp_stats(m, s);
  return {m, s};
}

// Warp 0 writes the row's answer: the winners (at most 64, empty slots 0) sorted largest first in
// registers, rank r in lane r % 32 (first, second as write_winners takes them), by a bitonic network
// whose exchanges across lanes are shuffles; then their probabilities.
__device__ void write_radix_best(const RadixShared& sh, int k, kl::MaxSum ms, float* prob, int* idx) {
  const int lane = threadIdx.x;
  Key v[2] = {lane < sh.count ? sh.best[lane] : 0, lane + 32 < sh.count ? sh.best[lane + 32] : 0};
#pragma unroll
  for (int size = 2; size <= 64; size *= 2) {
#pragma unroll
    for (int stride = size / 2; stride > 0; stride /= 2) {
      Key other[2];  // rank e's pair is e ^ stride: the lane's other register at stride 32
#pragma unroll
      for (int r = 0; r < 2; ++r) other[r] = stride == 32 ? v[1 - r] : __shfl_xor_sync(kl::kFullMask, v[r], stride);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int e = 32 * r + lane;  // runs of `size` ranks alternate descending / ascending
        const bool larger = ((e & stride) == 0) == ((e & size) == 0);
        v[r] = larger ? max(v[r], other[r]) : min(v[r], other[r]);
      }
    }
  }
  write_winners(v[0], v[1], k, lane, ms.m, ms.s, prob, idx);
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

// Step 8's second kernel: a block per row takes the k best of its slices' winners with the same
// select (one chunk of keys at the slice counts radix_slices picks), combines their (m, s) and
// writes the answer.
__global__ void __launch_bounds__(kBlockThreads)
    topk_radix_merge(const Key* part_keys, const float2* part_stats, int slices, int k, float* prob, int* idx) {
  __shared__ RadixShared sh;
  const std::int64_t row = blockIdx.x;
  const int t = threadIdx.x, n = slices * k;
  kl::MaxSum mine{-INFINITY, 0.f};
  for (int sl = t; sl < slices; sl += kBlockThreads)
    mine = kl::combine(mine, {part_stats[row * slices + sl].x, part_stats[row * slices + sl].y});
  const Key* keys = part_keys + row * n;
  radix_select((n + kRadixChunk - 1) / kRadixChunk, k, sh, [&](int c, Key(&chunk)[kRadixItems + 1]) {
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i) {
      const int at = c * kRadixChunk + i * kBlockThreads + t;
      chunk[i] = at < n ? keys[at] : 0;
    }
  });
  const kl::MaxSum ms = block_stats(mine.m, mine.s, sh);
  if (t < 32) write_radix_best(sh, k, ms, prob + row * k, idx + row * k);
}

// Launches topk_radix_slices on `slices` slices of every row (at most one a chunk) and, with more
// than one, the merge. The test also runs other slice counts than radix_slices': slices of several
// chunks, and merges of several chunks of keys.
template <class T>
void run_radix(const Problem& p, int slices, Workspace& ws, cudaStream_t s) {
  const int used = std::min(slices, radix_chunks(p.vocab));
  if (used > 1) {
    ws.part_keys.resize(static_cast<std::size_t>(p.rows * used * p.k));
    ws.part_stats.resize(static_cast<std::size_t>(p.rows * used));
  }
  topk_radix_slices<T><<<static_cast<unsigned>(p.rows * used), kBlockThreads, 0, s>>>(
      static_cast<const T*>(p.x), p.vocab, p.k, used, p.prob, p.idx, ws.part_keys.data(), ws.part_stats.data());
  CUDA_CHECK_LAUNCH();
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
