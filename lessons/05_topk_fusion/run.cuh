// Lesson 05, the executable's run: the legend of the error column, one shape in one dtype through the
// chosen steps (kl::run_steps: n/a with the reason, or poison, run once, check, and time only a step
// that passed), which step the dispatcher ran, the sampler's row under --sample, and the kl::Lesson
// that main.cu hands to the driver.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/ladder.hpp"
#include "common/timing.cuh"
#include "lessons/05_topk_fusion/host.cuh"
#include "lessons/05_topk_fusion/sample.cuh"
#include "lessons/05_topk_fusion/topk.cuh"

namespace lesson05 {

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

// --sample: the sampler (sample.cuh) on one shape instead of the steps, as one row labelled "sample":
// checked (every row's token inside the float64 reference's nucleus; error = the share outside) and
// timed like a step. Bytes are the top-K's floor: the logits read once, a token per row written.
template <class T>
std::vector<kl::Row> run_sample(const Shape& sh, kl::Context<Launch>& cx) {
  const SampleParams sp = sample_params(cx.args, sh.k, sh.vocab);
  std::vector<float> xf;
  std::vector<T> xt;
  make_logits(sh, xf, xt);
  const Reference ref = cx.check ? reference(xf, sh.rows, sh.vocab, sh.k) : Reference{};
  const kl::DeviceBuffer<T> x(xt);
  kl::DeviceBuffer<int> tokens(static_cast<std::size_t>(sh.rows));
  SampleWorkspace ws;
  char name[96];
  std::snprintf(name, sizeof name, "sample[T=%g k=%d p=%g]", sp.temperature, sp.top_k, sp.top_p);
  kl::Row row{"sample", name, dtype_name(dtype_of<T>()), shape_text(sh)};
  row.bytes = static_cast<double>(sh.rows) * sh.vocab * sizeof(T) + static_cast<double>(sh.rows) * 4.0;
  std::printf("\nR x V = %lld x %d %s, sampler: temperature %g, top_k %d, top_p %g, seed %llu\n",
              static_cast<long long>(sh.rows), sh.vocab, dtype_name(dtype_of<T>()), sp.temperature, sp.top_k, sp.top_p,
              static_cast<unsigned long long>(sp.seed));
  const auto launch = [&](cudaStream_t s) { sample(x.data(), tokens.data(), sh.rows, sh.vocab, sp, ws, s); };
  tokens.poison();
  launch(cx.timer.stream());
  CUDA_CHECK(cudaStreamSynchronize(cx.timer.stream()));
  kl::record_check(
      row, cx.check, [&] { return sample_error(tokens.download(static_cast<std::size_t>(sh.rows)), xf, ref, sp); },
      0.0);
  kl::time_if_ok(cx.timer, row, launch, kl::TimingOptions{cx.reps, cx.slow_ms, cx.graph_below_ms, cx.warmup_ms});
  kl::print_table(std::cout, {row}, cx.limits);
  return {row};
}

inline std::vector<kl::Row> run(const Shape& sh, kl::Context<Launch>& cx) {
  std::vector<kl::Row> rows;
  with_type(parse_dtype(cx.args.dtype), [&](auto t) {
    using T = decltype(t);
    rows = cx.args.flag("sample") ? run_sample<T>(sh, cx) : run_shape<T>(sh, cx);
  });
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
      {"sample", kl::Option::flag, "time the sampler (sample.cuh) instead of the steps: top_k = K", false},
      {"temperature", kl::Option::text, "the sampler's temperature, > 0 (default 1)", false},
      {"top-p", kl::Option::text, "the sampler's nucleus mass, in (0, 1] (default 1: no cut)", false},
      {"seed", kl::Option::text, "the sampler's Philox seed (default 0)", false},
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
