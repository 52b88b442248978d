// Step 7: short rows (MoE routing: 8 to 256 experts a token), a row per group of lanes sized to the
// row. Step 2's per-lane list and merge, with the warp cut into 32 / G groups of G lanes.
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// A warp per row of 8 logits leaves 24 lanes idle and pays 5 shuffle levels per winner for one row,
// so small-V rows are issue-bound (ncu at 65536 x 8 x 2: step 2's issue slots 82 % busy, the memory
// idle). Here G = the fewest lanes (a power of two) that hold at most kLogitsPerLane logits each: a
// thread per row at V <= 8, 8 lanes at V = 64, the whole warp from V = 256. A warp then serves 32 / G
// rows, and the merge's butterfly has log2(G) levels (none at G = 1).
constexpr int kLogitsPerLane = 8;

inline int lanes_per_row(int vocab) {
  int g = 1;
  while (g < 32 && std::int64_t{g} * kLogitsPerLane < vocab) g *= 2;
  return g;
}

// Lane l of a row's group folds logits l, l + G, ... into its (m, s) and its sorted list; the group
// combines (m, s), then takes its k winners in k rounds of a max over the group's list heads, and the
// lane holding a round's winner pops it and writes it. A group past the last row runs empty: its
// warp stays whole for the shuffles.
template <class T, int KC>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    topk_lanes_per_row(const T* x, std::int64_t rows, int vocab, int k, int lanes, float* prob, int* idx) {
  const std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const bool live = row < rows;
  const T* xr = x + (live ? row : 0) * vocab;
  Partial<KC> part;
  for (int c = lane; live && c < vocab; c += lanes) {
    const float v = kl::to_float(xr[c]);
    add_to_sum(part.m, part.s, v);
    insert_sorted(part.keys, make_key(v, c));
  }
  warp_stats(part.m, part.s, lanes);
  for (int r = 0; r < k; ++r) {
    const Key best = group_max(part.keys[0], lanes);
    if (part.keys[0] == best) {  // keys are distinct: one lane of a live group
      pop_best(part.keys);
      if (live) {
        prob[row * k + r] = kl::fast_exp(key_value(best) - part.m) / part.s;
        idx[row * k + r] = key_index(best);
      }
    }
  }
}

inline void launch_lanes_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  const int lanes = lanes_per_row(p.vocab);
  constexpr int kThreads = 32 * kWarpsPerBlock;
  const auto blocks = static_cast<unsigned>((p.rows * lanes + kThreads - 1) / kThreads);
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_kc(p.k, [&](auto kc) {
      topk_lanes_per_row<T, kc()>
          <<<blocks, kThreads, 0, s>>>(static_cast<const T*>(p.x), p.rows, p.vocab, p.k, lanes, p.prob, p.idx);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
