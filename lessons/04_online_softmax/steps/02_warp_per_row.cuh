// Step 2: one warp per row, the row in registers. Step 1's threads each walk a row of their own, so a
// warp's loads touch 32 rows at once; here the 32 lanes of a warp read neighbouring packs of one row.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "lessons/04_online_softmax/parts.cuh"

namespace lesson04 {

constexpr int kWarpBlock = 128;  // threads per block of step 2

// How step 2 lays a row over a warp: `lanes` lanes a row (32 / lanes rows a warp), `packs` packs a lane. Rows of
// more than 8 packs take `min_packs` a lane at least (16-bit: 2, so a lane's shuffles and division serve two packs).
struct WarpShape {
  int lanes, packs;
};
template <class T>
constexpr int kWarpMinPacks = sizeof(T) == 2 ? 2 : 1;

inline WarpShape warp_shape(std::int64_t cols, int pack, int min_packs = 1) {
  int all = 1;  // the row's packs, rounded up to a power of two
  while (std::int64_t{all} * pack < cols) all *= 2;
  const int lanes = std::min(32, all >= 16 ? all / min_packs : all);
  return {lanes, all / lanes};
}

// f16 rows of four or more packs a lane keep the packs as loaded (half the registers of floats) and
// widen them again in each pass: more warps fit an SM, so more loads are in flight. (bf16 spills so.)
template <class T, int Pack, int kPacks>
constexpr bool kWarpRaw = Pack >= 2 && kPacks >= 4 && std::is_same_v<T, __half>;

// Blocks of step 2 that must fit on an SM (NOTES.md, step 2): floats up to 32 a lane, 8 (<= 64 registers),
// short 16-bit rows at two packs a lane 12 (<= 40), at 64 floats 6; raw f16 packs, 12 and 8.
template <class T, int Pack, int kPacks, bool kWhole>
constexpr int warp_min_blocks() {
  if (kWarpRaw<T, Pack, kPacks>) return resident_blocks(kPacks <= 4 ? 12 : 8, kWarpBlock);
  return resident_blocks(!kWhole && kPacks == 2 ? 12 : kPacks * Pack <= 32 ? 8 : 6, kWarpBlock);
}

// Step 2: a warp (or a group of lanes, for short rows) owns a row: one coalesced pass of 16-byte loads
// into registers, max and sum by shuffles, one pass of stores; no shared memory, no __syncthreads.
template <class T, int Pack, int kPacks, bool kWhole>
__global__ void __launch_bounds__(kWarpBlock, (warp_min_blocks<T, Pack, kPacks, kWhole>()))
    softmax_warp_per_row(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows, int cols, float scale,
                         int lanes_arg) {
  const int lanes = kWhole ? 32 : lanes_arg;  // kWhole: the row spans the warp, known when compiled
  const int lane = threadIdx.x % 32;
  const int sub = lane % lanes;  // this lane's place in its row
  const int rows_per_warp = 32 / lanes;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / 32);
  const std::int64_t warp = blockIdx.x * std::int64_t{blockDim.x / 32} + threadIdx.x / 32;
  for (std::int64_t first = warp * rows_per_warp; first < rows; first += warps * rows_per_warp) {
    const std::int64_t row = first + lane / lanes;
    const bool live = row < rows;  // lanes past the last row still take part in the shuffles
    const std::int64_t offset = (live ? row : 0) * cols;
    const auto each_pack = [&](auto body) {  // body(k, col) for this lane's packs inside the row
#pragma unroll
      for (int k = 0; k < kPacks; ++k)
        if (const int col = (k * lanes + sub) * Pack; live && col < cols) body(k, col);
    };
    if constexpr (kWarpRaw<T, Pack, kPacks>) {  // the same three passes over packs kept as loaded
      kl::Pack<T, Pack> r[kPacks];
      float m = -INFINITY, s = 0.f, f[Pack];
      each_pack([&](int k, int col) {
        kl::to_floats(r[k] = kl::load_raw<Pack>(x + offset + col), f);
        for (int i = 0; i < Pack; ++i) m = kl::max_nan_1op(m, f[i] * scale);
      });
      m = kl::warp_allreduce<kl::MaxOp>(m, lanes);
      each_pack([&](int k, int) {
        kl::to_floats(r[k], f);
        for (int i = 0; i < Pack; ++i) s += kl::exp_ftz(f[i] * scale - m);
      });
      const float inv = 1.f / kl::warp_allreduce<kl::SumOp>(s, lanes);
      each_pack([&](int k, int col) {
        kl::to_floats(r[k], f);
        for (int i = 0; i < Pack; ++i) f[i] = kl::exp_ftz(f[i] * scale - m) * inv;
        kl::store_pack<Pack>(y + offset + col, f);
      });
      continue;
    }
    float v[kPacks][Pack], m = -INFINITY;
    for (int k = 0; k < kPacks; ++k)
      for (int i = 0; i < Pack; ++i) v[k][i] = -INFINITY;  // e^(-inf - max) = 0: padding adds nothing
    each_pack([&](int k, int col) {
      kl::load_pack<Pack>(x + offset + col, v[k]);
      scale_all(v[k], scale);
      for (int i = 0; i < Pack; ++i)  // 16-bit rows: twice the elements a byte, so one max.NaN each (NOTES.md)
        m = sizeof(T) == 2 ? kl::max_nan_1op(m, v[k][i]) : kl::max_nan(m, v[k][i]);
    });
    m = kl::warp_allreduce<kl::MaxOp>(m, lanes);
    float s = 0.f;
    for (int k = 0; k < kPacks; ++k)
      for (int i = 0; i < Pack; ++i) s += v[k][i] = kl::exp_ftz(v[k][i] - m);
    const float inv = 1.f / kl::warp_allreduce<kl::SumOp>(s, lanes);
    each_pack([&](int k, int col) {
      scale_all(v[k], inv);
      kl::store_pack<Pack>(y + offset + col, v[k]);
    });
  }
}

// One launch of step 2's kernel: as many blocks as fit on the GPU at once, striding over the rows.
template <class T, int Pack, int kPacks, bool kWhole>
void launch_warp_kernel(const Problem& p, WarpShape w, cudaStream_t s) {
  const auto kernel = softmax_warp_per_row<T, Pack, kPacks, kWhole>;
  static const int per_sm = blocks_per_sm(kernel, kWarpBlock, 0);
  const std::int64_t rows_per_block = kWarpBlock / 32 * (32 / w.lanes);
  const std::int64_t grid =
      std::min<std::int64_t>((p.rows + rows_per_block - 1) / rows_per_block, std::int64_t{per_sm} * kl::sm_count());
  kernel<<<static_cast<unsigned>(grid), kWarpBlock, 0, s>>>(static_cast<const T*>(p.x), static_cast<T*>(p.y), p.rows,
                                                            static_cast<int>(p.cols), p.scale, w.lanes);
  CUDA_CHECK_LAUNCH();
}

// Step 2 with as many packs a lane (kPacks = 1, 2, 4, ...) as the row needs.
template <class T, int Pack, int kPacks>
void launch_warp_t(const Problem& p, WarpShape w, cudaStream_t s) {
  if constexpr (kPacks * Pack > kWarpMaxPerLane) {
    throw std::logic_error("step 2: no kernel for " + std::to_string(w.packs) + " packs per lane");
  } else if (w.packs != kPacks) {
    launch_warp_t<T, Pack, kPacks * 2>(p, w, s);
  } else if constexpr (kPacks == 1) {
    launch_warp_kernel<T, Pack, 1, false>(p, w, s);
  } else if (kPacks > kWarpMinPacks<T> || w.lanes == 32) {  // the row spans the warp
    launch_warp_kernel<T, Pack, kPacks, true>(p, w, s);
  } else if constexpr (kPacks == kWarpMinPacks<T>) {  // a short 16-bit row at two packs a lane
    launch_warp_kernel<T, Pack, kPacks, false>(p, w, s);
  }
}

inline void launch_warp_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_widest_pack<T>(p, [&](auto pack) {
      constexpr int kPack = decltype(pack)::value;
      launch_warp_t<T, kPack, 1>(p, warp_shape(p.cols, kPack, kWarpMinPacks<T>), s);
    });
  });
}

}  // namespace lesson04
