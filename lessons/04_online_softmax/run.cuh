// Lesson 04, the executable's run: the legend of the error column, one shape in one dtype through the
// chosen steps (kl::run_steps: n/a with the reason, or poison, run once, check, and time only a step
// that passed), which step the dispatcher ran, and the kl::Lesson that main.cu hands to the driver.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "common/arch.cuh"
#include "common/ladder.hpp"
#include "lessons/04_online_softmax/host.cuh"
#include "lessons/04_online_softmax/softmax.cuh"

namespace lesson04 {

// The legend under the limits: how the error is measured and when a step passes, for the run's dtype.
inline std::string error_legend(Dtype dtype) {
  const Tolerance tol = tolerance(dtype);
  char line[160];
  std::snprintf(line, sizeof line,
                "error:  max |y - ref| / (|ref| + %.0e), ref = float64 softmax; passes at <= %.1e;  "
                "[g] = CUDA-graph replay",
                tol.abs / tol.rel, tol.rel);
  return line;
}

// One shape in one dtype: fresh inputs rounded to T, the float64 reference, then the chosen steps
// (kl::run_steps: n/a with the reason, or poison, run once, check, and time only a step that
// passed), then which step the dispatcher ran.
template <class T>
std::vector<kl::Row> run_shape_t(std::int64_t rows, std::int64_t cols, kl::Context<Launch>& cx) {
  const Dtype dtype = dtype_of<T>();
  const auto n = static_cast<std::size_t>(rows * cols);
  std::vector<float> xf;
  const kl::DeviceBuffer<T> x(make_input<T>(rows, cols, xf));
  const std::vector<double> ref = cx.check ? ref_softmax(xf, rows, cols) : std::vector<double>{};
  const Tolerance tol = tolerance(dtype);
  kl::DeviceBuffer<T> y(n);
  Workspace ws;
  const Problem p{x.data(), y.data(), rows, cols, dtype, 1.f};

  std::printf("\nM x K = %lld x %lld %s: %.1f MiB read + %.1f MiB written; floor at copy bandwidth = %.4f ms\n",
              static_cast<long long>(rows), static_cast<long long>(cols), dtype_name(dtype), n * sizeof(T) / 1048576.0,
              n * sizeof(T) / 1048576.0, 2.0 * n * sizeof(T) / (cx.limits.copy_gbps * 1e9) * 1e3);
  kl::Trial trial;
  trial.proto.dtype = dtype_name(dtype);
  trial.proto.shape = shape_text(rows, cols);
  trial.proto.bytes = 2.0 * n * sizeof(T);
  trial.poison = [&] { y.poison(); };
  trial.error = [&] { return max_error(y.download(n), ref, tol); };
  trial.tolerance = tol.rel;
  const std::vector<kl::Row> out = kl::run_steps(cx, trial, [&](const SoftmaxStep& st, cudaStream_t s) {
    kl::refuse_if(st.launch.support(p, device_caps()));
    st.launch(p, ws, s);
  });
  if (std::find(cx.chosen.begin(), cx.chosen.end(), kDispatchStep - 1) != cx.chosen.end()) {
    const int pack = kl::widest_pack(p.x, p.y, cols, sizeof(T));
    const int chosen = chosen_step(p);
    std::printf("%d dispatch ran step %d (%s): K=%lld %s, pack %d\n", kDispatchStep, chosen, kSteps[chosen - 1].name,
                static_cast<long long>(cols), dtype_name(dtype), pack);
  }
  return out;
}

inline std::vector<kl::Row> run_shape(const Shape& sh, kl::Context<Launch>& cx) {
  std::vector<kl::Row> rows;
  with_type(parse_dtype(cx.args.dtype), [&](auto t) { rows = run_shape_t<decltype(t)>(sh.first, sh.second, cx); });
  return rows;
}

// The executable: its step table, options, shapes and run, for the driver (main.cu).
inline kl::Lesson<Launch, Shape> lesson() {
  kl::Lesson<Launch, Shape> l;
  l.id = "04";
  l.title = "online softmax: softmax of each row of an [M, K] matrix";
  l.steps.assign(std::begin(kSteps), std::end(kSteps));
  l.options = {
      {"rows", kl::Option::size, "rows (default: 2^26 / K, so M * K = 2^26 elements, well over the L2 cache)"},
      {"cols", kl::Option::size, "row length, the softmax dimension (default 4096); N or 2^E"},
  };
  l.dtypes = {"f32", "f16", "bf16"};
  l.sweep_help = "run K = 32 ... 131072 (powers of two) and 1000, 4097, 50257, each with M = 2^26 / K";
  l.notes =
      "Loads and stores in the dtype, arithmetic in f32.\n"
      "Bytes counted: M * K elements read + M * K written.\n";
  l.slow_ms = 20.0;  // step 1 at long rows: three repetitions are enough (NOTES.md)
  l.shapes = [](const kl::Args& a) { return shapes(a.size("rows"), a.size("cols"), a.sweep); };
  l.device_bytes = [](const Shape& sh, const kl::Args& a) {
    return 2.0 * static_cast<double>(sh.first) * static_cast<double>(sh.second) * dtype_bytes(parse_dtype(a.dtype));
  };
  // The host holds the input in f32 (4 bytes an element), the float64 reference (8) and a download
  // of the output (the dtype's size).
  l.host_bytes = [](const Shape& sh, const kl::Args& a) {
    return static_cast<double>(sh.first) * static_cast<double>(sh.second) * (12.0 + dtype_bytes(parse_dtype(a.dtype)));
  };
  l.legend = [](const kl::Args& a) { return error_legend(parse_dtype(a.dtype)); };
  l.run = run_shape;
  return l;
}

}  // namespace lesson04
