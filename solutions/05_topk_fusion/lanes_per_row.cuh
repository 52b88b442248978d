// Exercise 05.3, solved: the group's end of a kernel with a row per group of lanes, as in step 7 (see
// exercises/05_topk_fusion for the task).
//
// The group's (m, s) is warp_stats over `lanes` lanes; the winners come out in k rounds of a 64-bit
// max-butterfly over the group's list heads, and the lane that held a round's winner pops it and
// writes it. A group past the last row shuffles like the others and writes nothing.
#pragma once
#include <cstdint>

#include "common/softmax_math.cuh"
#include "lessons/05_topk_fusion/parts.cuh"  // Key, make_key, key_value, Partial, add_to_sum, warp_stats, ...

template <int KC>
__device__ __forceinline__ void group_finish(lesson05::Partial<KC>& part, int k, int lanes, int lane, bool live,
                                             float* prob, int* idx) {
  lesson05::warp_stats(part.m, part.s, lanes);
  for (int r = 0; r < k; ++r) {
    lesson05::Key best = part.keys[0];
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
      const lesson05::Key other = __shfl_xor_sync(kl::kFullMask, best, offset);
      best = other > best ? other : best;
    }
    if (part.keys[0] == best) {
#pragma unroll
      for (int j = 0; j < KC - 1; ++j) part.keys[j] = part.keys[j + 1];
      part.keys[KC - 1] = 0;
      if (live) {
        prob[r] = kl::fast_exp(lesson05::key_value(best) - part.m) / part.s;
        idx[r] = lesson05::key_index(best);
      }
    }
  }
  (void)lane;
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
