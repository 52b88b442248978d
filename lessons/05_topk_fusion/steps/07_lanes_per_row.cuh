// Step 7: short rows (MoE routing: 8 to 256 experts a token), a row per group of lanes sized to the
// row, the row held whole in the group's registers. Steps 2-4 stream a row through a warp's lists;
// here each lane loads its 8 logits at once, sorts them (at K <= 2 keeps its best K), and the group
// takes K rounds of its heads' max.
#pragma once
#include <cstdint>

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

// Lane l of a group holds logits 8 l ... 8 l + 7 of its row as stored: one or two 16-byte loads when
// every row starts on 16 bytes (V a multiple of 8), else one load a logit. Slots past the row's end
// keep what they held (the caller empties them). All loads are issued before any is used.
template <bool kPacked, class T>
__device__ __forceinline__ void load_lane(const T* xr, int vocab, int c0, T (&raw)[kLogitsPerLane]) {
  constexpr int P = 16 / sizeof(T);
  if constexpr (kPacked) {
#pragma unroll
    for (int q = 0; q < kLogitsPerLane / P; ++q) {
      if (c0 < vocab) {
        const kl::Pack<T, P> pk = kl::load_raw<P>(xr + c0 + q * P);
#pragma unroll
        for (int i = 0; i < P; ++i) raw[q * P + i] = pk.v[i];
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kLogitsPerLane; ++i)
      if (c0 + i < vocab) raw[i] = xr[c0 + i];
  }
}

// Step 7: each lane's 8 keys sorted in registers (a merge network, no shared memory; with K = 1 or 2
// only the best S = K of them), then k rounds: the group's largest head (group_max_redux), which its
// lane pops. Every lane of the group learns each round's winner; lane l keeps rounds l, l + G, ...
// (won[j], j a compile-time index). Round 0's winner is the row's max m, so the sum s = sum of
// e^(x - m) needs no running rescale: the lane's 8 terms, then a butterfly over the group. The lanes
// write their winners side by side. G and S are template parameters: every loop but the rounds' (K, a
// run-time value) is unrolled, and a round is one redux.sync (G = 32; two for a float's 64-bit keys)
// or log2 G butterfly levels. A group past the last row runs empty: its warp stays whole for the
// reductions. Float rows of 16 or 32 lanes at K > 2 first bound the winners from below (K <= G rounds
// on one int a lane): only the logits at or above it, about K + 1, become keys (bounded_topk, parts.cuh).
template <class T, int G, int S>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    topk_lanes_per_row(const T* x, std::int64_t rows, int vocab, int k, bool packed, float* prob, int* idx) {
  const int lane = static_cast<int>(threadIdx.x) % G, c0 = kLogitsPerLane * lane;
  const std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) / G;
  const bool live = row < rows;
  const T* xr = x + (live ? row : 0) * vocab;
  T raw[kLogitsPerLane] = {};
  if (packed) load_lane<true>(xr, live ? vocab : 0, c0, raw);
  else load_lane<false>(xr, live ? vocab : 0, c0, raw);
  if constexpr (S == kLogitsPerLane && kBounded<T, G>) {   // else, or if the warp's rows are not bounded: all 8
    __shared__ float2 lists[32 * kWarpsPerBlock / G][32];  // (logit, index) of each group's candidates
    if (bounded_topk<T, G>(raw, live, row, vocab, k, lane, lists[threadIdx.x / G], prob, idx)) return;
  }
  float v[kLogitsPerLane];
  LaneKey<T> keys[kLogitsPerLane], top[S];
#pragma unroll
  for (int i = 0; i < kLogitsPerLane; ++i) {  // made for every slot, then kept or emptied by a mask: no branch
    const bool in_row = live && c0 + i < vocab;
    v[i] = in_row ? kl::to_float(raw[i]) : -INFINITY;
    keys[i] = lane_key<T>(raw[i], c0 + i) & (LaneKey<T>{0} - in_row);
  }
  sort_best<S>(keys, top);              // S = 1 or 2 slots when K is, else all 8 keys sorted
  LaneKey<T> won[kLogitsPerLane] = {};  // k <= V <= 8 G: at most 8 rounds a lane
#pragma unroll
  for (int j = 0; j < kLogitsPerLane; ++j) {
    for (int i = 0; i < G && j * G + i < k; ++i) {  // round j G + i
      const LaneKey<T> best = group_max_redux(top[0], G);
      if (top[0] == best) pop_best(top);  // keys are distinct: one lane of a live group
      if (i == lane) won[j] = best;
    }
  }
  // NaN or +inf in the row make s NaN, as add_to_sum does; against a max of -inf the terms are taken
  // against 0 (all of them e^-inf = 0).
  const float m = lane_key_value<T>(__shfl_sync(kl::kFullMask, won[0], 0, G)), base = m == -INFINITY ? 0.f : m;
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kLogitsPerLane; ++i) s += kl::exp_ftz(v[i] - base);
  const float inv = 1.f / kl::warp_allreduce(s, G);
#pragma unroll
  for (int j = 0; j < kLogitsPerLane; ++j) {
    const int r = j * G + lane;
    if (live && r < k) {
      prob[row * k + r] = kl::fast_exp(lane_key_value<T>(won[j]) - m) * inv;
      idx[row * k + r] = key_index(won[j]);
    }
  }
}

// Step 7 for rows of G = lanes_per_row(V) lanes (found by doubling G from 1): S = K sorted slots a lane
// when K is 1 or 2, else all 8.
template <class T, int G = 1>
void launch_group(const Problem& p, bool packed, cudaStream_t s) {
  if constexpr (G < 32) {
    if (G < lanes_per_row(p.vocab)) return launch_group<T, G * 2>(p, packed, s);
  }
  constexpr int kThreads = 32 * kWarpsPerBlock;
  const auto blocks = static_cast<unsigned>((p.rows * G + kThreads - 1) / kThreads);
  auto launch = [&](auto kernel) {
    kernel<<<blocks, kThreads, 0, s>>>(static_cast<const T*>(p.x), p.rows, p.vocab, p.k, packed, p.prob, p.idx);
  };
  if (p.k == 1) launch(topk_lanes_per_row<T, G, 1>);
  else if (p.k == 2) launch(topk_lanes_per_row<T, G, 2>);
  else launch(topk_lanes_per_row<T, G, kLogitsPerLane>);
}

inline void launch_lanes_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  if (p.vocab > kMaxGroupRow)
    throw kl::NotSupported("step 7 holds a row in a group's registers: V <= " + std::to_string(kMaxGroupRow));
  const bool packed = p.vocab % kLogitsPerLane == 0 && reinterpret_cast<std::uintptr_t>(p.x) % 16 == 0;
  with_type(p.dtype, [&](auto t) { launch_group<decltype(t)>(p, packed, s); });
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
