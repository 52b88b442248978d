// Step 3: a block per row, kept on chip, past step 2's 2048: in registers up to 16 KB rows, in shared
// memory up to ~227 KiB. Pieces later steps reuse (RowPacks, the caching, sum and store passes) are in parts.cuh.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "lessons/04_online_softmax/parts.cuh"

namespace lesson04 {

// Step 3: a block owns a row; its one pass over global memory keeps the row in shared memory, and the
// max, sum and store passes read it from there: one read, one write, rows up to a block's shared memory.
template <class T, int Pack, int kThreads>
__global__ void __launch_bounds__(kThreads, kFullSmThreads / kThreads)
    softmax_block_cached(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows, int cols, float scale) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* cache = reinterpret_cast<T*>(smem);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const RowPacks<Pack> r(xr, cols);
    T* const rc = cache + r.shift;  // the row in the cache: element c at rc[c]
    const float m = kl::block_allreduce<kThreads, kl::MaxOp>(cache_and_max<Pack, kThreads>(xr, cache, r, scale));
    const float s = exp_sum<Pack, kThreads>(rc, r, scale, m);
    const float inv = 1.f / kl::block_allreduce<kThreads>(s);
    store_probs<Pack, kThreads>(rc, yr, r, scale, m, inv);
  }
}

// Step 3 for rows past step 2's and of at most kRegisterThreads x kRegisterItems 16-byte packs (4096
// f32, 8192 f16), x and y on 16 bytes: thread t holds packs t, t + kRegisterThreads, ... in registers.
// No shared-memory round trip, each e^(x scale - m) taken once, one barrier a reduction (NOTES.md, H200).
constexpr int kRegisterThreads = 256;
constexpr int kRegisterItems = 4;

// Blocks that must fit on an SM, by floats a thread holds: as many as keep its registers from spilling.
constexpr int register_min_blocks(int floats) { return resident_blocks(floats <= 24 ? 6 : 4, kRegisterThreads); }
template <class T, int kItems>
__global__ void __launch_bounds__(kRegisterThreads, register_min_blocks(kItems * 16 / sizeof(T)))
    softmax_block_registers(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows, int cols, float scale) {
  constexpr int P = 16 / sizeof(T);
  __shared__ float max_parts[kRegisterThreads / 32], sum_parts[kRegisterThreads / 32];
  const int packs = cols / P;
  auto mine = [&](int i) { return i * kRegisterThreads + static_cast<int>(threadIdx.x) < packs; };
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::int64_t at = row * cols + threadIdx.x * P;  // pack i of this thread: at + i * kRegisterThreads * P
    // Every load issued before any is used. A pack past the row's end loads the row's first pack again
    // and is dropped whole (its max and sum): merging -inf into a 16-bit pack's halves cost a permute each.
    kl::Pack<T, P> raw[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      raw[i] = kl::load_raw<P>(x + (mine(i) ? at + i * kRegisterThreads * P : row * cols));
    float v[kItems][P], m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      kl::to_floats(raw[i], v[i]);
      float pm = -INFINITY;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        v[i][j] *= scale;
        pm = kl::max_nan_1op(pm, v[i][j]);
      }
      m = kl::max_nan_1op(m, mine(i) ? pm : -INFINITY);
    }
    m = kl::block_allreduce_one_barrier<kRegisterThreads, kl::MaxOp>(m, max_parts);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      float ps = 0.f;
#pragma unroll
      for (int j = 0; j < P; ++j) ps += v[i][j] = kl::exp_ftz(v[i][j] - m);
      s += mine(i) ? ps : 0.f;
    }
    const float inv = 1.f / kl::block_allreduce_one_barrier<kRegisterThreads>(s, sum_parts);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      scale_all(v[i], inv);
      if (mine(i)) store_whole<P>(y + at + i * kRegisterThreads * P, v[i]);
    }
  }
}

// Blocks of kThreads that fit an SM with smem bytes of shared memory each (opted in past 48 KiB once).
template <class T, int Pack, int kThreads>
int cached_blocks_per_sm(std::size_t smem) {
  static const bool ready = allow_large_smem(softmax_block_cached<T, Pack, kThreads>);
  (void)ready;
  return blocks_per_sm(softmax_block_cached<T, Pack, kThreads>, kThreads, smem);
}

// One launch of step 3 (T, Pack, kThreads): per_sm blocks on every SM, each taking rows in turn.
template <class T, int Pack, int kThreads>
void run_cached(const Problem& p, std::size_t smem, int per_sm, cudaStream_t s) {
  const std::int64_t grid = std::min<std::int64_t>(p.rows, std::int64_t{per_sm} * kl::sm_count());
  softmax_block_cached<T, Pack, kThreads><<<static_cast<unsigned>(grid), kThreads, smem, s>>>(
      static_cast<const T*>(p.x), static_cast<T*>(p.y), p.rows, static_cast<int>(p.cols), p.scale);
  CUDA_CHECK_LAUNCH();
}

// Step 3's block size: of these, the smallest that keeps the most threads resident per SM, given how
// many blocks of each fit. Smaller blocks at the same occupancy overlap their load, reduce and store.
constexpr std::array<int, 4> kBlockSizes = {128, 256, 512, 1024};
inline int fullest_block(const std::array<int, 4>& blocks_per_sm) {
  int best = 0;
  for (int i = 1; i < 4; ++i)
    if (blocks_per_sm[i] * kBlockSizes[i] > blocks_per_sm[best] * kBlockSizes[best]) best = i;
  return best;
}

// Step 3's register path with as many packs a thread as the row needs: 3 (f32) or 2 (f16) up to kRegisterItems.
template <class T, int kItems = static_cast<int>(kWarpMaxCols / (16 / sizeof(T) * kRegisterThreads)) + 1>
void launch_registers(const Problem& p, cudaStream_t s) {
  constexpr std::int64_t P = 16 / sizeof(T);
  if constexpr (kItems < kRegisterItems) {
    if (p.cols > P * kRegisterThreads * kItems) return launch_registers<T, kItems + 1>(p, s);
  }
  const auto kernel = softmax_block_registers<T, kItems>;
  static const int per_sm = blocks_per_sm(kernel, kRegisterThreads, 0);
  const std::int64_t grid = std::min<std::int64_t>(p.rows, std::int64_t{per_sm} * kl::sm_count());
  kernel<<<static_cast<unsigned>(grid), kRegisterThreads, 0, s>>>(static_cast<const T*>(p.x), static_cast<T*>(p.y),
                                                                  p.rows, static_cast<int>(p.cols), p.scale);
  CUDA_CHECK_LAUNCH();
}

// Step 3 for packs of Pack elements, in the block size that keeps the most threads resident.
template <class T, int Pack>
void launch_cached_t(const Problem& p, cudaStream_t s) {
  constexpr int P = 16 / sizeof(T);
  const bool fits = p.cols > kWarpMaxCols && p.cols <= P * kRegisterThreads * kRegisterItems;  // past step 2's rows
  if (fits && kl::widest_pack(p.x, p.y, p.cols, sizeof(T)) == P) return launch_registers<T>(p, s);
  const std::size_t smem = cache_bytes<T, Pack>(p.cols);
  const std::array<int, 4> per_sm = {cached_blocks_per_sm<T, Pack, 128>(smem), cached_blocks_per_sm<T, Pack, 256>(smem),
                                     cached_blocks_per_sm<T, Pack, 512>(smem),
                                     cached_blocks_per_sm<T, Pack, 1024>(smem)};
  const int i = fullest_block(per_sm);
  if (per_sm[i] == 0)
    throw NotSupported("no block with " + std::to_string(smem) + " bytes of shared memory fits an SM");
  if (i == 0) run_cached<T, Pack, 128>(p, smem, per_sm[i], s);
  else if (i == 1) run_cached<T, Pack, 256>(p, smem, per_sm[i], s);
  else if (i == 2) run_cached<T, Pack, 512>(p, smem, per_sm[i], s);
  else run_cached<T, Pack, 1024>(p, smem, per_sm[i], s);
}

inline void launch_block_cached(const Problem& p, Workspace&, cudaStream_t s) {
  for_block_kernels(p, [&](auto t, auto pack) { launch_cached_t<decltype(t), decltype(pack)::value>(p, s); });
}

}  // namespace lesson04
