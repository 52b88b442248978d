// Lesson 05's product layer (a student may skip it): the dispatcher (step 9), the table of steps that
// main.cu and test.cu walk, the public API topk<T>, and the run of every chosen step on one shape.
// The problem and its reference are in problem.cuh, the steps in steps/, their shared pieces in parts.cuh.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    unfused                lesson 04 softmax writes R x V probs; cub segmented radix sort; keep K
//   2    warp_per_row           fused: a warp per row, online (max, sum) + register top-K per lane, warp merge
//   3    warp_vector            step 2 + 16-byte loads + early reject below each lane's K-th best
//   4    warp_select            one K-best list per warp: a shared threshold, candidates appended to shared memory
//   5    block_per_row          a block per row: 8 warps select, warp 0 sorts their lists together
//   6    split_row              a row split over blocks + a second kernel merging the slices (decode)
//   7    lanes_per_row          short rows (MoE routing): a row per group of 1-32 lanes, step 2's lists and merge
//   8    radix_select           decode: slices select their K best by a block radix histogram, a block per row merges
//   9    dispatch               picks step 2, 3, 4, 5, 7 or 8 by R, V, K and dtype
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
// Rows of at most kTinyRow logits (MoE routing) get a group of lanes sized to the row (step 7: H100,
// 16384-65536 rows, V = 8 0.18-0.48x the time of step 2, V = 128 0.84-0.90x). Up to kSmallRow a warp
// per row, 8 logits a lane: 16-bit rows in one 16-byte load a lane (step 3: 0.97x the time of step 2
// at V = 256, K = 8), f32 rows in two, where step 3's reject never pays (1.03x step 2's time).
// Long rows: with a warp per row and K <= kLaneK, each lane's own K best in registers (step 3) beat
// the warp's shared list (H100, R = 4096: f16 K = 1 and 2 take 0.63-0.83x the time of step 4, f32
// 0.97-1.02x). Otherwise the first of step 4 (R warps) and step 5 (8 R warps) whose warps reach a
// quarter of the wanted ones (H100, V = 128256, K = 50: at R = 1024 step 5 took 1.14-1.56x the time
// of step 4, at R = 256 0.40-0.52x), else step 8, whose radix selects cost each row's blocks a fixed
// number of passes (20 us at R = 1, 63 at R = 64, 196 at R = 256 against step 5's 88-118).
constexpr int kWantedWarpsPerSm = 16;
constexpr int kEnoughShare = 4;
constexpr int kShortRow = 4096;
constexpr int kTinyRow = 128;
constexpr int kSmallRow = 256;
constexpr int kLaneK = 2;

inline int choose_step(std::int64_t rows, int vocab, int k, int sms, Dtype dtype = Dtype::f32) {
  const std::int64_t wanted = std::int64_t{sms} * kWantedWarpsPerSm, enough = wanted / kEnoughShare;
  if (vocab <= kTinyRow) return 7;
  if (vocab <= kSmallRow) return dtype == Dtype::f32 ? 2 : 3;
  if (rows >= wanted && vocab > kShortRow && k <= kLaneK) return 3;
  if (vocab <= kShortRow || rows >= enough) return 4;
  if (rows * kBlockWarps >= enough) return 5;
  return 8;
}

inline int chosen_step(const Problem& p) { return choose_step(p.rows, p.vocab, p.k, kl::sm_count(), p.dtype); }

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
// with __reduce_add_sync on sm_80+ and with shuffles below (warp_sum); step 8's __match_any_sync is sm_70+.
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
    kl::step("lanes_per_row", "short rows (MoE routing): a row per group of 1-32 lanes, step 2's lists and merge",
             Launch{launch_lanes_per_row, true}),
    kl::step("radix_select", "decode: slices select their K best by a block radix histogram, a block per row merges",
             Launch{launch_radix_select, true}),
    kl::step("dispatch", "picks step 2, 3, 4, 5, 7 or 8 by R, V, K and dtype", Launch{launch_dispatch, true}),
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

// ---- the run of the chosen steps on one shape (lesson05's executable) -----------------------------

// The legend of the error column, printed once after the limit line.
inline std::string error_legend() {
  char line[320];
  std::snprintf(
      line, sizeof line,
      "error:  max |p - ref| / (|ref| + abs/rel) over the K results, ref = float64 softmax; inf = a wrong index;\n"
      "        passes at <= %.0e (steps 2-9, float results) or the dtype's rounding (step 1);  "
      "[g] = CUDA-graph replay",
      tolerance(Dtype::f32).rel);
  return line;
}

// One shape: fresh logits rounded to T, the float64 reference, then every chosen step poisoned, run,
// checked and timed by kl::run_steps; last, which step the dispatcher ran.
template <class T>
std::vector<kl::Row> run_shape(const Shape& sh, kl::Context<Launch>& cx) {
  const Dtype dtype = dtype_of<T>();
  const auto n = static_cast<std::size_t>(sh.rows * sh.vocab);
  const auto out = static_cast<std::size_t>(sh.rows * sh.k);
  std::vector<float> xf;
  std::vector<T> xt;
  make_logits(sh, xf, xt);
  const Reference ref = cx.check ? reference(xf, sh.rows, sh.vocab, sh.k) : Reference{};
  const kl::DeviceBuffer<T> x(xt);
  kl::DeviceBuffer<float> prob(out);
  kl::DeviceBuffer<int> idx(out);
  Workspace ws;
  const Problem p{x.data(), prob.data(), idx.data(), sh.rows, sh.vocab, sh.k, dtype};
  const double bytes = static_cast<double>(n) * sizeof(T) + static_cast<double>(out) * 8.0;
  std::printf("\nR x V = %lld x %d %s, K = %d: %.1f MiB read; floor at copy bandwidth = %.4f ms\n",
              static_cast<long long>(sh.rows), sh.vocab, dtype_name(dtype), sh.k, n * sizeof(T) / 1048576.0,
              bytes / (cx.limits.copy_gbps * 1e9) * 1e3);

  // The check depends on the step (fused: exact indices, f32 tolerance; step 1: the dtype's), so
  // running a step sets it; run_steps checks a step right after its first run.
  bool fused = true;
  kl::Trial trial{kl::Row{"", "", dtype_name(dtype), shape_text(sh)}, [&] {
                    prob.poison();
                    idx.poison();
                  }};
  trial.proto.bytes = bytes;
  trial.error = [&] {
    const Tolerance tol = tolerance(fused ? Dtype::f32 : dtype);
    return max_error(prob.download(out), idx.download(out), ref, xf, tol, fused);
  };
  const std::vector<kl::Row> rows = kl::run_steps(cx, trial, [&](const Step& st, cudaStream_t s) {
    fused = st.launch.fused;
    trial.tolerance = tolerance(fused ? Dtype::f32 : dtype).rel;
    run_step(st, p, ws, s);
  });
  if (std::find(cx.chosen.begin(), cx.chosen.end(), kDispatchStep - 1) != cx.chosen.end()) {
    const int chosen = chosen_step(p);
    std::printf("%d dispatch ran step %d (%s)", kDispatchStep, chosen, kSteps[chosen - 1].name);
    if (chosen == 8) std::printf(" with %d slices per row", radix_slices(sh.vocab, sh.k));
    if (chosen == 7) std::printf(" with %d lanes per row", lanes_per_row(sh.vocab));
    std::printf("\n");
  }
  return rows;
}

inline std::vector<kl::Row> run(const Shape& sh, kl::Context<Launch>& cx) {
  std::vector<kl::Row> rows;
  with_type(parse_dtype(cx.args.dtype), [&](auto t) { rows = run_shape<decltype(t)>(sh, cx); });
  return rows;
}

// The executable: its step table, options, shapes and run, for the driver (main.cu).
inline kl::Lesson<Launch, Shape> lesson() {
  kl::Lesson<Launch, Shape> l;
  l.id = "05";
  l.title = "fused softmax + top-K: the K most likely entries of each row of logits [R, V]";
  l.steps = kSteps;
  l.options = {
      {"rows", kl::Option::size, "rows of logits (default 4096); N or 2^E"},
      {"vocab", kl::Option::size, "logits per row, the softmax dimension (default 50257)"},
      {"k", kl::Option::size, "probabilities kept per row, 1 to 64 and at most V (default 10)"},
      {"logits", kl::Option::text,
       "normal (default: normal(0, 2)), masked (20 finite per row, the rest -inf) or equal (all 1)", false},
  };
  l.dtypes = {"f32", "f16", "bf16"};
  l.sweep_help =
      "R = 4096 with V in {32000, 50257, 128256} x K in {1, 10, 50}, K = 2 ... 64 at\n"
      "               V = 50257, decode R = 1 ... 1024 at V = 128256, K = 50, and MoE routing:\n"
      "               R = 16384, 65536 with V x K = 8 x 1, 8 x 2, 64 x 6, 128 x 8, 256 x 8";
  l.notes =
      "Logits are loaded in the dtype, arithmetic and results are f32.\n"
      "Bytes counted (the floor): R * V logits read once + R * K (probability, index) pairs written.\n";
  l.slow_ms = 20.0;  // step 1 takes tens of ms at V = 128256: three repetitions are enough
  l.shapes = shapes;
  l.device_bytes = [](const Shape& sh, const kl::Args& a) { return device_bytes(sh, parse_dtype(a.dtype)); };
  l.legend = [](const kl::Args&) { return error_legend(); };
  l.run = run;
  return l;
}

}  // namespace lesson05
