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

#include "common/ladder.hpp"
#include "lessons/04_online_softmax/host.cuh"
#include "lessons/04_online_softmax/softmax.cuh"

namespace lesson04 {

// The line under the limits: how the error is measured and when a step passes, for the run's dtype.
inline void print_error_line(Dtype dtype) {
  const Tolerance tol = tolerance(dtype);
  std::printf(
      "error:  max |y - ref| / (|ref| + %.0e), ref = float64 softmax; passes at <= %.1e;  "
      "[g] = CUDA-graph replay\n",
      tol.abs / tol.rel, tol.rel);
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
    const std::string why = st.launch.support(p, device_caps());
    if (!why.empty()) throw NotSupported(why);
    st.launch.run(p, ws, s);
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

}  // namespace lesson04
