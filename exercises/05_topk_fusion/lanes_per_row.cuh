// Exercise 05.3: step 7's group of lanes per row, for the short rows of MoE routing, in a streaming form.
//
// A warp per row of 8 logits leaves 24 of its lanes idle. Step 7 gives each row a group of G lanes,
// the fewest (a power of two, at most 32) that hold at most 8 logits each, so that a warp serves
// 32 / G rows: a thread per row at V <= 8, 8 lanes for a row of 64. The kernel below is given: each
// lane folds its logits into its (max, sum) and its sorted list of KC keys, as in step 2 (step 7
// itself loads a lane's 8 logits at once and sorts them in registers; the group's end is the same
// idea: a (max, sum) over the group, then k rounds of the group's best list head). You write
// group_finish, the row's (m, s) and its k winners. As written, lane 0 of a group writes its own
// list as the row's: right when a thread holds the whole row (V <= 8), wrong from V = 9 on.
//
// TODO:
//   1. The row's (m, s): combine the group's G lanes' (m, s) by a butterfly over the group alone.
//      lesson05::warp_stats(m, s, width) does it for aligned groups of `width` lanes: xor offsets
//      below G never leave the group.
//   2. The k winners, largest first, in k rounds: each round a max over the group's list heads (a
//      butterfly of 64-bit keys, offsets G/2, ..., 1); the lane whose head is the round's winner (keys
//      are distinct) pops it and, if its row exists, writes p = e^(x - m) / s and the index at rank r.
//   3. Every lane of the warp takes part in every shuffle, a group past the last row too (live =
//      false: it writes nothing).
// Grade it: scripts/grade.sh 05.3
#pragma once
#include <cstdint>

#include "common/softmax_math.cuh"
#include "lessons/05_topk_fusion/parts.cuh"  // Key, make_key, key_value, Partial, add_to_sum, warp_stats, ...

template <int KC>
__device__ __forceinline__ void group_finish(lesson05::Partial<KC>& part, int k, int lanes, int lane, bool live,
                                             float* prob, int* idx) {
  // TODO: the group's (m, s) and its k winners; this is right only when a lane holds the whole row
  if (!live || lane != 0) return;
  for (int r = 0; r < k; ++r) {
    prob[r] = kl::fast_exp(lesson05::key_value(part.keys[r]) - part.m) / part.s;
    idx[r] = lesson05::key_index(part.keys[r]);
  }
  (void)lanes;
}

// A row per group of `lanes` lanes, f32 (lesson05::lanes_per_row: 1, 2, 4, ..., 32), streamed: lane l of
// the group folds logits l, l + lanes, ... into its (max, sum) and its list of KC keys, then
// group_finish writes the row's k (probability, index) pairs, k <= KC. A group past the last row
// runs empty (live = false), so that its warp stays whole for the shuffles.
template <int KC>
__global__ void __launch_bounds__(32 * lesson05::kWarpsPerBlock)
    topk_lanes_per_row(const float* x, std::int64_t rows, int vocab, int k, int lanes, float* prob, int* idx) {
  const std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) / lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const bool live = row < rows;
  const std::int64_t at = live ? row : 0;
  lesson05::Partial<KC> part;
  for (int c = lane; live && c < vocab; c += lanes) {
    const float v = x[at * vocab + c];
    lesson05::add_to_sum(part.m, part.s, v);
    lesson05::insert_sorted(part.keys, lesson05::make_key(v, c));
  }
  group_finish(part, k, lanes, lane, live, prob + at * k, idx + at * k);
}
