// Lesson 05's product layer (a student may skip it): the dispatcher (step 9), the table of steps that
// main.cu and test.cu walk, and the public API topk<T>. The problem and its reference are in
// problem.cuh, the steps in steps/, their shared pieces in parts.cuh, the sampler built on topk<T> in
// sample.cuh, and the executable's run of the chosen steps on one shape in run.cuh.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    unfused                lesson 04 softmax writes R x V probs; cub segmented radix sort; keep K
//   2    warp_per_row           fused: a warp per row, online (max, sum) + register top-K per lane, warp merge
//   3    warp_vector            step 2 + 16-byte loads + early reject below each lane's K-th best
//   4    warp_select            one K-best list per warp: a shared threshold, candidates appended to shared memory
//   5    block_per_row          a block per row: 8 warps select, warp 0 sorts their lists together
//   6    split_row              a row split over blocks + a second kernel merging the slices (decode)
//   7    lanes_per_row          short rows (MoE routing): a row in the registers of a group of 1-32 lanes
//   8    radix_select           decode: slices select their K best by a block radix histogram, a block per row merges
//   9    dispatch               picks step 4, 5, 7 or 8 by R, V and K
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/ladder.hpp"
#include "lessons/05_topk_fusion/host.cuh"
#include "lessons/05_topk_fusion/parts.cuh"
#include "lessons/05_topk_fusion/problem.cuh"
#include "lessons/05_topk_fusion/steps/01_unfused.cuh"
#include "lessons/05_topk_fusion/steps/02_warp_per_row.cuh"
#include "lessons/05_topk_fusion/steps/03_warp_vector.cuh"
#include "lessons/05_topk_fusion/steps/04_warp_select.cuh"
#include "lessons/05_topk_fusion/steps/05_block_per_row.cuh"
#include "lessons/05_topk_fusion/steps/06_split_row.cuh"
#include "lessons/05_topk_fusion/steps/07_lanes_per_row.cuh"
#include "lessons/05_topk_fusion/steps/08_radix_select.cuh"

namespace lesson05 {

// ---- step 9: the dispatcher -----------------------------------------------------------------------

// A streaming kernel needs about 16 warps per SM, each with two 16-byte loads per lane in flight,
// to cover the memory latency (H100: ~3.3 TB/s x ~0.8 us = ~2.6 MB in flight, ~20 KB per SM).
// Rows of at most kSmallRow logits (MoE routing) get a group of lanes sized to the row, which holds it
// in registers (step 7; H100, 16384-65536 rows, f32 and f16: 0.16-0.82x the time of the better of steps 2
// and 3 at V = 8, 64, 128, 200 and 256 and K = 1 to 8, results/h100/lesson05_moe_templates.csv).
// Long rows, at every K (at K = 1 step 4's bound keeps the row's max so far as step 3's lanes do, and
// ran within 4 % of it or faster): the first of step 4 (R warps) and step 5 (8 R warps) whose warps
// reach a quarter of the wanted ones (H100, V = 128256, K = 50: at R = 1024 step 5 took 1.14-1.56x the
// time of step 4, at R = 256 0.40-0.52x), else step 8, whose radix selects cost each row's blocks a
// fixed number of passes (20 us at R = 1, 63 at R = 64, 196 at R = 256 against step 5's 88-118).
constexpr int kWantedWarpsPerSm = 16;
constexpr int kEnoughShare = 4;
constexpr int kShortRow = 4096;
constexpr int kSmallRow = 256;
static_assert(kSmallRow <= kMaxGroupRow, "the dispatcher sends step 7 only rows its groups hold");

inline int choose_step(std::int64_t rows, int vocab, int k, int sms) {
  const std::int64_t wanted = std::int64_t{sms} * kWantedWarpsPerSm, enough = wanted / kEnoughShare;
  if (vocab <= kSmallRow) return 7;
  if (vocab <= kShortRow || rows >= enough) return 4;
  if (rows * kBlockWarps >= enough) return 5;
  return 8;
}

inline int chosen_step(const Problem& p) { return choose_step(p.rows, p.vocab, p.k, kl::sm_count()); }

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s);  // after the table

// ---- the table of steps ---------------------------------------------------------------------------

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);

// A step's launcher, and whether the step ranks logits itself (then its indices must equal the
// reference's exactly, and its float results meet the f32 tolerance).
struct Launch {
  Launcher run;
  bool fused;
  // Every lesson calls its step the same way: st.launch(...), with the launcher's arguments.
  void operator()(const Problem& p, Workspace& ws, cudaStream_t s) const { run(p, ws, s); }
};

using Step = kl::Step<Launch>;

// Every step runs on any GPU from sm_75: the selection of steps 4-6 counts the warp's candidates
// with __reduce_add_sync on sm_80+ and with shuffles below (warp_sum).
inline const std::vector<Step> kSteps = {
    kl::step("unfused", "lesson 04 softmax writes R x V probs; cub segmented radix sort; keep K",
             Launch{launch_unfused, false}),
    kl::step("warp_per_row", "fused: a warp per row, online (max, sum) + register top-K per lane, warp merge",
             Launch{launch_warp_per_row, true}),
    kl::step("warp_vector", "step 2 + 16-byte loads + early reject below each lane's K-th best",
             Launch{launch_warp_vector, true}),
    kl::step("warp_select", "one K-best list per warp: a shared threshold, candidates appended to shared memory",
             Launch{launch_warp_select, true}),
    kl::step("block_per_row", "a block per row: 8 warps select, warp 0 sorts their lists together",
             Launch{launch_block_per_row, true}),
    kl::step("split_row", "a row split over blocks + a second kernel merging the slices (decode)",
             Launch{launch_split_row, true}),
    kl::step("lanes_per_row",
             "short rows (MoE routing): a row in the registers of a group of 1-32 lanes, K rounds of its max",
             Launch{launch_lanes_per_row, true}),
    kl::step("radix_select", "decode: slices select their K best by a block radix histogram, a block per row merges",
             Launch{launch_radix_select, true}),
    kl::step("dispatch", "picks step 4, 5, 7 or 8 by R, V and K", Launch{launch_dispatch, true}),
};

inline constexpr int kDispatchStep = 9;

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s) {
  kSteps[chosen_step(p) - 1].launch(p, ws, s);
}

// Runs a step: validates the problem first (no launch on bad input), launches nothing for R = 0.
inline void run_step(const Step& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p);
  if (p.rows == 0) return;
  st.launch(p, ws, s);
}

// The public API: the k largest softmax probabilities of each row of x [rows, vocab] and their
// indices, sorted (ties: the lower index first), through the dispatcher. ws keeps steps 6 and 8's scratch
// between calls (and makes a repeated call capturable in a CUDA graph). Throws kl::UsageError,
// launching nothing, when k is not in 1..64 or k > vocab.
template <class T>
void topk(const T* x, float* prob, int* idx, std::int64_t rows, int vocab, int k, Workspace& ws,
          cudaStream_t s = nullptr) {
  run_step(kSteps[kDispatchStep - 1], Problem{x, prob, idx, rows, vocab, k, dtype_of<T>()}, ws, s);
}

}  // namespace lesson05
