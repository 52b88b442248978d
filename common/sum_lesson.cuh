// The reduction lessons (01-03) as executables: --n and the sweep, the trial against the float64 sum
// and its tolerance, the run for one n, and the kl::Lesson a main.cu hands to the driver
// (common/ladder.hpp). The kernels' side of the problem is common/sum_problem.cuh.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/ladder.hpp"
#include "common/random.hpp"
#include "common/reference.hpp"
#include "common/sum_problem.cuh"

namespace kl {

using SumContext = Context<SumKernel>;

// --n, default 2^26 floats (256 MiB, well over the L2 cache); --sweep: n = 2^10, 2^12, ..., 2^28.
constexpr std::size_t kDefaultN = std::size_t{1} << 26;

inline std::vector<std::size_t> sum_shapes(const Args& args) {
  std::vector<std::size_t> sizes;
  if (args.sweep) {
    for (int e = 10; e <= 28; e += 2) sizes.push_back(std::size_t{1} << e);
  } else {
    sizes.push_back(static_cast<std::size_t>(args.size("n").value_or(kDefaultN)));
  }
  return sizes;
}

// One trial: n uniform floats from host (the first n of them) against their float64 sum.
inline Trial sum_trial(const std::vector<float>& host, std::size_t n, DeviceBuffer<float>& out) {
  const SumRef ref = ref_sum(host.data(), n);
  const double scale = ref.abs_sum > 0 ? ref.abs_sum : 1.0;  // the scale scaled_error divides by
  Trial t;
  t.proto = Row{"", "", "f32", "n=" + std::to_string(n)};
  t.proto.bytes = 4.0 * n;
  t.poison = [&out] { out.poison(); };
  t.error = [&out, ref] { return scaled_error(out.download(1)[0], ref.sum, ref.abs_sum); };
  t.tolerance = sum_tolerance(n, ref.abs_sum) / scale;  // error <= tolerance is sum_close
  return t;
}

// Checks and times the chosen steps on n uniform floats in [-1, 1): each step's output is poisoned,
// it runs once and is compared with the float64 sum, and only a step whose check passed is timed.
// A step with most_n < n runs on the first most_n values; its time is scaled to n and its name marked.
inline std::vector<Row> run_sum(std::size_t n, SumContext& cx) {
  std::printf("\nn = %zu (%.1f MiB); floor = read once at copy bandwidth = %.4f ms\n", n, 4.0 * n / (1 << 20),
              4.0 * n / (cx.limits.copy_gbps * 1e9) * 1e3);
  const std::vector<float> host = uniform_floats(n, -1.0, 1.0, seed_for(n));
  const DeviceBuffer<float> x(host);
  DeviceBuffer<float> out(1);
  std::vector<Scratch> scratch(cx.steps.size());  // each step's own: no step sees what another left in it
  auto on = [&](std::size_t m) {
    return [&, m](const SumStep& st, cudaStream_t s) {
      st.launch(x.data(), m, out.data(), scratch[&st - cx.steps.data()], s);
    };
  };
  std::vector<int> whole, capped;
  for (int i : cx.chosen) (runs_whole(cx.steps[i], n) ? whole : capped).push_back(i);
  Measured m = measure_steps(cx, whole, sum_trial(host, n, out), on(n));
  for (int i : capped) {
    const SumStep& st = cx.steps[i];
    const std::size_t most = st.launch.most_n;
    if (cx.args.sweep) {
      m.notes.push_back(step_label(cx.steps, i) + " " + st.name + ": not run above n = " + std::to_string(most) +
                        " in a sweep (seconds per launch)");
      continue;
    }
    Measured part = measure_steps(cx, {i}, sum_trial(host, most, out), on(most));
    const double times = static_cast<double>(n) / most;
    for (Row r : part.rows) {
      r.ms.median *= times;
      r.ms.min *= times;
      r.ms.max *= times;
      r.shape = "n=" + std::to_string(n);
      r.bytes = 4.0 * n;
      r.name += "[scaled x" + std::to_string(static_cast<long long>(times + 0.5)) + "]";
      m.rows.push_back(r);
      m.notes.push_back(r.step + " " + st.name + ": timed on the first " + std::to_string(most) +
                        " values, the time scaled to n (one launch over all n takes seconds, long enough for a "
                        "display's watchdog to kill it); its error is that of those values");
    }
    m.notes.insert(m.notes.end(), part.notes.begin(), part.notes.end());
  }
  std::vector<Row> rows;  // in table order
  for (int i : cx.chosen)
    for (const Row& r : m.rows)
      if (r.step == step_label(cx.steps, i)) rows.push_back(r);
  print_measured(Measured{rows, m.notes}, cx.limits);
  // A sweep drops a step once it takes over a second per run: four times the n would cost minutes.
  for (const Row& r : rows) {
    if (!cx.args.sweep || !r.ok || r.ms.median <= 1000.0) continue;
    for (int i : find_steps(cx.steps, r.name))
      cx.chosen.erase(std::remove(cx.chosen.begin(), cx.chosen.end(), i), cx.chosen.end());
    std::printf("(the sweep stops running step %s, %s, after this n: over 1 s per run)\n", r.step.c_str(),
                r.name.c_str());
  }
  return rows;
}

// A reduction lesson for the driver: its steps, --n and the sweep, and run_sum for each n.
inline Lesson<SumKernel, std::size_t> sum_lesson(const char* id, const char* title, std::vector<SumStep> steps) {
  Lesson<SumKernel, std::size_t> l;
  l.id = id;
  l.title = title;
  l.steps = std::move(steps);
  l.options = {{"n", Option::size, "number of floats (default 2^26 = 256 MiB, well over the L2 cache); N or 2^K"}};
  l.sweep_help = "run n = 2^10, 2^12, ..., 2^28 instead of one n";
  l.slow_ms = 200.0;
  l.shapes = sum_shapes;
  l.legend = [](const Args&) -> std::string {
    return "error:  |GPU sum - float64 sum| / sum|x|;  [g] = timed by CUDA-graph replay";
  };
  l.device_bytes = [](const std::size_t& n, const Args&) { return 4.0 * n; };
  l.run = run_sum;
  return l;
}

}  // namespace kl
