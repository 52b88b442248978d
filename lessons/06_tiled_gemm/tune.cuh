// Lesson 06 — the executable's side of the product: --tune's candidate tile configurations, the
// FP32 limit line, and the run of one shape (inputs, reference, the steps or the candidates, which
// path the dispatcher took) that main.cu hands to the ladder driver.
#pragma once
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/ladder.hpp"
#include "lessons/06_tiled_gemm/gemm.cuh"
#include "lessons/06_tiled_gemm/problem.cuh"

namespace lesson06 {

// ---- --tune: step 6's candidate tiles, each with K split into 1, 2, 4 or 8 slices -----------------

// D = A B, no epilogue; slices > 1 add the reduction kernel. Tuned and SplitCfg are the winners.
template <class Cfg>
void launch_candidate(const Problem& p, int slices, Workspace& ws, cudaStream_t s) {
  if (slices == 1) launch_warp_tiled<Cfg, NoEpilogue>(p, s);
  else launch_split_k<Cfg>(p, slices, ws, s);
}

struct Candidate {
  const char* name;
  void (*launch)(const Problem& p, int slices, Workspace& ws, cudaStream_t s);
};

// Config<BM, BN, BK, Q, S>: Q = 2 is 8x8 a thread, Q = 4 16x8; S stages.
inline constexpr Candidate kCandidates[] = {
    {"128x256x16 8x8", launch_candidate<Config<128, 256, 16, 2, 3>>},
    {"256x128x16 8x8", launch_candidate<Config<256, 128, 16, 2, 3>>},
    {"128x128x16 8x8", launch_candidate<Config<128, 128, 16, 2, 3>>},
    {"128x128x16 8x8 S2", launch_candidate<Config<128, 128, 16, 2, 2>>},
    {"128x128x32 8x8", launch_candidate<Config<128, 128, 32, 2, 3>>},
    {"256x128x8 16x8", launch_candidate<Config<256, 128, 8, 4, 3>>},
    {"256x128x16 16x8", launch_candidate<Config<256, 128, 16, 4, 3>>},
    {"128x64x16 8x8", launch_candidate<Config<128, 64, 16, 2, 3>>},
    {"64x64x16 8x8", launch_candidate<Config<64, 64, 16, 2, 3>>},
};

// Every candidate on the plain problem p, checked and timed like a step; rows labelled "tune". Where
// step 6's kernel cannot run (below sm_80), step 5's kernel, which the dispatcher uses there, instead.
inline std::vector<kl::Row> run_tune(const Shape& sh, kl::Context<Launch>& cx, const kl::Trial& t, const Problem& p,
                                     Workspace& ws) {
  std::vector<kl::Row> rows;
  const auto time_row = [&](const std::string& name, auto&& launch) {
    kl::Row row = t.proto;
    row.step = "tune";
    row.name = name;
    t.poison();
    launch(cx.timer.stream());  // the check run, which also warms up and grows the workspace
    CUDA_CHECK(cudaStreamSynchronize(cx.timer.stream()));
    kl::record_check(row, cx.check, t.error, t.tolerance);
    kl::time_if_ok(cx.timer, row, launch, kl::TimingOptions{cx.reps, cx.slow_ms});
    rows.push_back(row);
  };
  if (const std::string& why = warp_tiled_missing(); !why.empty()) {
    time_row("double_buffer 128x128x16 8x8", [&](cudaStream_t s) { launch_double_buffer(p, s); });
    kl::print_table(std::cout, rows, cx.limits);
    std::printf("tune: step 6's candidates n/a: %s; timed step 5's kernel, which gemm() runs here\n", why.c_str());
    return rows;
  }
  for (const auto& cand : kCandidates) {
    for (int slices : {1, 2, 4, 8}) {
      if (slices > 1 && sh.k / slices < 64) continue;
      time_row(std::string(cand.name) + " split " + std::to_string(slices),
               [&](cudaStream_t s) { cand.launch(p, slices, ws, s); });
    }
  }
  kl::print_table(std::cout, rows, cx.limits);
  return rows;
}

// ---- the executable -------------------------------------------------------------------------------

// The limit of this lesson (FP32 peak from the SM count and clock), and how the error is measured.
inline void fp32_limit(kl::Limits& l, const kl::DeviceInfo& dev) {
  l.peak_tflops = dev.peak_fp32_tflops();
  std::printf("limit:  FP32 peak %.1f TFLOP/s (%d SMs x 128 FMA x 2 x %.2f GHz)\n", l.peak_tflops, dev.sms,
              dev.sm_clock_khz / 1e6);
  std::printf(
      "error:  max |D - ref| / (|alpha| sum|a b| + |beta c| + |bias|), ref = float64; passes at <= "
      "(min(K, 16 sqrt K) + 8) eps;  [g] = CUDA-graph replay\n");
}

inline std::string plan_text(const Shape& sh) {
  const bool aligned = sh.k % 4 == 0 && sh.n % 4 == 0;  // the executable's A and B start 16-byte aligned
  const Plan pl = plan(sh.m, sh.n, sh.k, kl::sm_count(), aligned, warp_tiled_missing().empty());
  if (pl.path == Path::naive) return "the naive kernel (tiny problem)";
  if (pl.path == Path::double_buffer) return "step 5's double-buffered kernel, 128x128x16 tiles (no cp.async)";
  if (pl.path == Path::tiled) return "the tuned warp-tiled kernel, 128x256x16 tiles, 8x8 per thread";
  if (pl.path == Path::unaligned)
    return "the warp-tiled kernel with 128x64x16 tiles (rows of A or B not 16-byte aligned)";
  if (pl.path == Path::small_tiles)
    return "the warp-tiled kernel with 128x64x16 tiles (few 128x256 tiles, K too short to split)";
  return "split-K over " + std::to_string(pl.slices) + " slices, 128x64x16 tiles, + the reduction";
}

// One shape: inputs and reference, then the chosen steps (or --tune's candidates). Steps with the
// epilogue are checked against the whole problem and named with it ("fused_epilogue[bias n gelu_tanh]"),
// the others against its GEMM part.
inline std::vector<kl::Row> run_shape(const Shape& sh, kl::Context<Launch>& cx, Workspace& ws) {
  const Epilogue e = epilogue(cx.args);
  Inputs in;
  make_inputs(in, sh, e);
  Reference ref;
  if (cx.check) ref = reference(in.a.data(), sh.k, in.b.data(), sh.n, sh.m, sh.n, sh.k, ws);
  const double flops = 2.0 * sh.m * sh.n * sh.k;
  std::printf("\nM x N x K = %d x %d x %d, alpha %g, beta %g; epilogue of step 7: bias %s, %s\n", sh.m, sh.n, sh.k,
              e.alpha, e.beta, bias_name(e.bias), act_name(e.act));
  std::printf("%.3g GFLOP; floor at the FP32 peak = %.4f ms\n", flops / 1e9,
              flops / (cx.limits.peak_tflops * 1e12) * 1e3);
  bool epilogue_step = false;  // of the step last launched: run_steps checks right after each launch
  kl::Trial t{kl::Row{"", "", "f32", shape_text(sh)}, [&] { in.dd.poison(); },
              [&] {
                const Problem checked = epilogue_step ? in.p : plain(in.p);
                return max_error(in.dd.download(static_cast<std::size_t>(sh.m) * sh.n), checked, ref, in.host);
              },
              tolerance(sh.k)};
  t.proto.flops = flops;
  std::vector<kl::Row> rows;
  if (cx.args.flag("tune")) {
    rows = run_tune(sh, cx, t, plain(in.p), ws);
  } else {
    std::vector<std::string> names;
    names.reserve(cx.steps.size());  // the shown names' storage: no reallocation below
    const std::string suffix = std::string("[bias ") + bias_name(e.bias) + " " + act_name(e.act) + "]";
    std::vector<GemmStep> shown = cx.steps;
    for (auto& st : shown)
      if (st.launch.epilogue) st.name = names.emplace_back(st.name + suffix).c_str();
    kl::Context<Launch> named{shown, cx.chosen, cx.args, cx.dev, cx.limits, cx.timer, cx.check, cx.reps, cx.slow_ms};
    rows = kl::run_steps(named, t, [&](const GemmStep& st, cudaStream_t s) {
      epilogue_step = st.launch.epilogue;
      run_step(st, in.p, ws, s);
    });
  }
  if (warp_tiled_missing().empty()) std::printf("steps 6-7 ran %s\n", plan_text(sh).c_str());
  else std::printf("steps 6-7 n/a; gemm() runs %s\n", plan_text(sh).c_str());
  return rows;
}

}  // namespace lesson06
