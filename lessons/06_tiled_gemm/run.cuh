// Lesson 06, the run of the executable: --tune's candidate tile configurations, the FP32 limit and the
// error legend, the run of one shape (inputs, reference, the steps or the candidates, which path the
// dispatcher took), and the kl::Lesson that main.cu hands to the ladder driver.
#pragma once
#include <cstdio>
#include <iostream>
#include <memory>
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
    time_row("double_buffer 128x128x16 8x8", [&](cudaStream_t s) { launch_double_buffer<Runtime>(p, s); });
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

// The limit of this lesson: the FP32 peak from the SM count and clock.
inline void fp32_limit(kl::Limits& l, const kl::DeviceInfo& dev) {
  l.peak_tflops = dev.peak_fp32_tflops();
  std::printf("limit:  FP32 peak %.1f TFLOP/s (%d SMs x 128 FMA x 2 x %.2f GHz)\n", l.peak_tflops, dev.sms,
              dev.sm_clock_khz / 1e6);
}

// How the error is measured, under the limit.
constexpr const char* kErrorLegend =
    "error:  max |D - ref| / (|alpha| sum|a b| + |beta c| + |bias|), ref = float64; passes at <= "
    "(min(K, 16 sqrt K) + 8) eps;  [g] = CUDA-graph replay";

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

// One shape: inputs and reference, then the chosen steps (or --tune's candidates). The steps with the
// epilogue are checked against the whole problem and named with it ("fused_epilogue[bias n gelu_tanh]"),
// the others against its GEMM part: two trials, one table.
inline std::vector<kl::Row> run_shape(const Shape& sh, kl::Context<Launch>& cx, Workspace& ws) {
  const Epilogue& e = sh.epilogue;
  Inputs in;
  make_inputs(in, sh, e);
  Reference ref;
  if (cx.check) ref = reference(in.a.data(), sh.k, in.b.data(), sh.n, sh.m, sh.n, sh.k, ws);
  const double flops = 2.0 * sh.m * sh.n * sh.k;
  std::printf("\nM x N x K = %d x %d x %d, alpha %g, beta %g; epilogue of step 7: bias %s, %s\n", sh.m, sh.n, sh.k,
              e.alpha, e.beta, bias_name(e.bias), act_name(e.act));
  std::printf("%.3g GFLOP; floor at the FP32 peak = %.4f ms\n", flops / 1e9,
              flops / (cx.limits.peak_tflops * 1e12) * 1e3);
  const auto trial = [&](const Problem& checked) {
    kl::Trial t{kl::Row{"", "", "f32", shape_text(sh)}, [&] { in.dd.poison(); },
                [&in, &ref, &sh, checked] {
                  return max_error(in.dd.download(static_cast<std::size_t>(sh.m) * sh.n), checked, ref, in.host);
                },
                tolerance(sh.k)};
    t.proto.flops = flops;
    return t;
  };
  std::vector<kl::Row> rows;
  if (cx.args.flag("tune")) {
    rows = run_tune(sh, cx, trial(plain(in.p)), plain(in.p), ws);
  } else {
    std::vector<int> gemm_only, with_epilogue;
    for (int i : cx.chosen) (cx.steps[i].launch.epilogue ? with_epilogue : gemm_only).push_back(i);
    const auto run = [&](const GemmStep& st, cudaStream_t s) { run_step(st, in.p, ws, s); };
    kl::Measured m = kl::measure_steps(cx, gemm_only, trial(plain(in.p)), run);
    const kl::Measured fused = kl::measure_steps(cx, with_epilogue, trial(in.p), run);
    const std::string suffix = std::string("[bias ") + bias_name(e.bias) + " " + act_name(e.act) + "]";
    for (kl::Row r : fused.rows) {
      r.name += suffix;
      m.rows.push_back(r);
    }
    m.notes.insert(m.notes.end(), fused.notes.begin(), fused.notes.end());
    for (int i : cx.chosen)  // in table order
      for (const kl::Row& r : m.rows)
        if (r.step == kl::step_label(cx.steps, i)) rows.push_back(r);
    kl::print_measured(kl::Measured{rows, m.notes}, cx.limits);
  }
  if (warp_tiled_missing().empty()) std::printf("steps 6-7 ran %s\n", plan_text(sh).c_str());
  else std::printf("steps 6-7 n/a; gemm() runs %s\n", plan_text(sh).c_str());
  return rows;
}

// The executable: its step table, options, shapes and run, for the driver (main.cu). One workspace
// (split-K's slices, the cuBLAS handle) serves every shape of the run.
inline kl::Lesson<Launch, Shape> lesson() {
  using kl::Option;
  kl::Lesson<Launch, Shape> l;
  l.id = "06";
  l.title = "SGEMM D = act(alpha A B + beta C + bias), float32, row-major";
  l.steps = kSteps;
  l.options = {
      {"m", Option::size, "rows of A and D (default 4096); a number or 2^E"},
      {"n", Option::size, "columns of B and D (default 4096)"},
      {"k", Option::size, "the inner dimension: columns of A, rows of B (default 4096)"},
      {"size", Option::size, "M = N = K = N: one size for all three (instead of --m, --n, --k)"},
      {"alpha", Option::text, "scales A B (default 1)", false},
      {"beta", Option::text, "scales C (default 0: C is not read)", false},
      {"bias", Option::text,
       "bias of step 7 and cublas+epilogue: per row (m), per column (n), a full M x N matrix, or none (default n)",
       false},
      {"act", Option::text,
       "activation of step 7 and cublas+epilogue: none, relu, leaky, gelu_tanh, gelu_erf (default gelu_tanh)", false},
      {"slope", Option::text, "LeakyReLU's slope for x < 0 (default 0.01)", false},
      {"tune", Option::flag,
       "time step 6's candidate tile configurations with K split 1, 2, 4, 8 ways, at the shape (or the sweep's); "
       "below sm_80 step 5's kernel",
       false},
  };
  l.sweep_help = "M = N = K = 256 ... 8192, and 4097^3, 1000 x 3000 x 777, 8192 x 64 x 8192";
  l.notes = "FLOPs counted: 2 M N K. The limit: FP32 peak = SMs x 128 FMA/clock x 2 x the SM clock.\n";
  l.slow_ms = 50.0;  // the naive step takes ~0.1-1 s at 4096^3 - 8192^3: three repetitions
  l.shapes = shapes;
  l.device_bytes = [](const Shape& sh, const kl::Args&) { return device_bytes(sh); };
  l.measure_limits = fp32_limit;
  l.legend = [](const kl::Args&) -> std::string { return kErrorLegend; };
  auto ws = std::make_shared<Workspace>();
  l.run = [ws](const Shape& sh, kl::Context<Launch>& cx) { return run_shape(sh, cx, *ws); };
  return l;
}

}  // namespace lesson06
