// Step 7: short rows (MoE routing: 8 to 256 experts a token), a row per group of lanes sized to the
// row, the row held whole in the group's registers. Steps 2-4 stream a row through a warp's lists;
// here each lane loads its 8 logits at once, sorts them, and the group takes K rounds of its heads' max.
#pragma once
#include <cstdint>
#include <type_traits>

#include "common/pack.cuh"
#include "common/warp.cuh"
#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// A warp per row of 8 logits leaves 24 lanes idle and pays 5 shuffle levels per winner for one row,
// so small-V rows are issue-bound (ncu at 65536 x 8 x 2: step 2's issue slots 82 % busy, the memory
// idle). Here G = the fewest lanes (a power of two) that hold at most kLogitsPerLane logits each: a
// thread per row at V <= 8, 8 lanes at V = 64, the whole warp at V = 256. A warp then serves 32 / G
// rows. Longer rows do not fit a group's registers: steps 2-5 and 8 take them.
constexpr int kLogitsPerLane = 8;
constexpr int kMaxGroupRow = 32 * kLogitsPerLane;

inline int lanes_per_row(int vocab) {
  int g = 1;
  while (g < 32 && std::int64_t{g} * kLogitsPerLane < vocab) g *= 2;
  return g;
}

// Lane l of a group holds logits 8 l ... 8 l + 7 of its row (-inf past its end): one or two 16-byte
// loads when every row starts on 16 bytes (V a multiple of 8), else one load a logit. All are issued
// before any is used.
template <bool kPacked, class T>
__device__ __forceinline__ void load_lane(const T* xr, int vocab, int c0, float (&v)[kLogitsPerLane]) {
  constexpr int P = 16 / sizeof(T);
  if constexpr (kPacked) {
#pragma unroll
    for (int q = 0; q < kLogitsPerLane / P; ++q) {
      float pack[P];
      if (c0 < vocab) kl::load_pack<P>(xr + c0 + q * P, pack);
#pragma unroll
      for (int i = 0; i < P; ++i) v[q * P + i] = c0 < vocab ? pack[i] : -INFINITY;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kLogitsPerLane; ++i) v[i] = c0 + i < vocab ? kl::to_float(xr[c0 + i]) : -INFINITY;
  }
}

// Step 7's keys: 32 bits for a 16-bit logit (make_key32), 64 for a float (make_key).
template <class T>
using LaneKey = std::conditional_t<sizeof(T) == 2, Key32, Key>;

template <class T>
__device__ __forceinline__ LaneKey<T> lane_key(float x, int i) {
  if constexpr (sizeof(T) == 2) return make_key32<T>(x, i);
  else return make_key(x, i);
}

template <class T>
__device__ __forceinline__ float lane_key_value(LaneKey<T> key) {
  if constexpr (sizeof(T) == 2) return key32_value<T>(key);
  else return key_value(key);
}

// Step 7: each lane's 8 keys sorted in registers (a bitonic network, no shared memory), then k rounds:
// the group's largest head (group_max_redux), which its lane pops. Every lane of the group learns each
// round's winner; lane l keeps rounds l, l + G, ... (won[j], j a compile-time index). Round 0's winner is
// the row's max m, so the sum s = sum of e^(x - m) needs no running rescale: the lane's 8 terms, then a
// butterfly over the group. The lanes write their winners side by side. A group past the last row runs
// empty: its warp stays whole for the reductions.
template <class T, bool kPacked>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    topk_lanes_per_row(const T* x, std::int64_t rows, int vocab, int k, int lanes, float* prob, int* idx) {
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1), c0 = kLogitsPerLane * lane;  // lanes: 2^n
  const std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) >> (__ffs(lanes) - 1);
  const bool live = row < rows;
  float v[kLogitsPerLane];
  load_lane<kPacked>(x + (live ? row : 0) * vocab, live ? vocab : 0, c0, v);
  LaneKey<T> keys[kLogitsPerLane];
#pragma unroll
  for (int i = 0; i < kLogitsPerLane; ++i) {
    const LaneKey<T> key = lane_key<T>(v[i], c0 + i);  // made for every slot, then kept or emptied: no branch
    keys[i] = live && c0 + i < vocab ? key : 0;
  }
  sort_registers(keys);
  LaneKey<T> won[kLogitsPerLane] = {};  // k <= V <= 8 G: at most 8 rounds a lane
#pragma unroll
  for (int j = 0; j < kLogitsPerLane; ++j) {
    for (int i = 0; i < lanes && j * lanes + i < k; ++i) {  // round j G + i
      const LaneKey<T> best = group_max_redux(keys[0], lanes);
      if (keys[0] == best) pop_best(keys);  // keys are distinct: one lane of a live group
      if (i == lane) won[j] = best;
    }
  }
  // NaN or +inf in the row make s NaN, as add_to_sum does; against a max of -inf the terms are taken
  // against 0 (all of them e^-inf = 0).
  const float m = lane_key_value<T>(__shfl_sync(kl::kFullMask, won[0], 0, lanes)), base = m == -INFINITY ? 0.f : m;
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kLogitsPerLane; ++i) s += kl::exp_ftz(v[i] - base);
  const float inv = 1.f / kl::warp_allreduce(s, lanes);
#pragma unroll
  for (int j = 0; j < kLogitsPerLane; ++j) {
    const int r = j * lanes + lane;
    if (live && r < k) {
      prob[row * k + r] = kl::fast_exp(lane_key_value<T>(won[j]) - m) * inv;
      idx[row * k + r] = key_index(won[j]);
    }
  }
}

inline void launch_lanes_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  if (p.vocab > kMaxGroupRow)
    throw kl::NotSupported("step 7 holds a row in a group's registers: V <= " + std::to_string(kMaxGroupRow));
  const int lanes = lanes_per_row(p.vocab);
  constexpr int kThreads = 32 * kWarpsPerBlock;
  const auto blocks = static_cast<unsigned>((p.rows * lanes + kThreads - 1) / kThreads);
  const bool packed = p.vocab % kLogitsPerLane == 0 && reinterpret_cast<std::uintptr_t>(p.x) % 16 == 0;
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kThreads, 0, s>>>(static_cast<const T*>(p.x), p.rows, p.vocab, p.k, lanes, p.prob, p.idx);
    };
    if (packed) launch(topk_lanes_per_row<T, true>);
    else launch(topk_lanes_per_row<T, false>);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
