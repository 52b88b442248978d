// The driver shared by the reduction lessons (01-03): they all sum n floats, so their steps share
// one launcher signature and one executable: CLI -> every step checked against a float64 sum ->
// the checked steps timed -> table and CSV. A lesson only supplies its table of steps.
#pragma once
#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/random.hpp"
#include "common/reference.hpp"
#include "common/report.hpp"
#include "common/timing.cuh"

namespace kl {

using Scratch = DeviceBuffer<unsigned char>;  // library workspace, grown by the launcher if needed
using SumLauncher = void (*)(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s);

struct SumStep {
  const char* name;
  const char* idea;
  SumLauncher launch;
  bool library;
  bool deterministic;  // same bits every run (no float atomics, whose order varies)
  // Adds all n elements into one float, one after another: its rounding error grows like n·ε, and
  // once the sum is 2^24 times a term, adding that term changes nothing (it is under half an ulp).
  bool one_accumulator = false;
};

struct SumLesson {
  const char* id;     // "01"
  const char* title;  // "naive reductions"
  const SumStep* steps;
  int count;
  // Optional: more rows for one size after the sum table (lesson 03 shows max and L2 norm with
  // the same template); returns its rows, already checked and timed.
  std::vector<Row> (*extra)(std::size_t n, Timer& timer, int reps) = nullptr;
};

// The library baseline of every reduction lesson. CUB asks for its temporary storage size first,
// then reduces (deterministically: fixed order, no atomics).
inline void launch_cub_sum(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  std::size_t bytes = 0;
  CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, x, out, static_cast<long long>(n), s));
  scratch.resize(bytes);  // allocates only the first time, which is the untimed check run
  CUDA_CHECK(cub::DeviceReduce::Sum(scratch.data(), bytes, x, out, static_cast<long long>(n), s));
}

inline std::string step_label(const SumLesson& l, int i) {
  return l.steps[i].library ? "lib" : std::to_string(i + 1);
}

// "--step 3", "--step grid_stride" or "--step lib" -> index; anything else is a UsageError.
inline int find_step(const SumLesson& l, const std::string& s) {
  for (int i = 0; i < l.count; ++i)
    if (s == l.steps[i].name || s == step_label(l, i)) return i;
  throw UsageError("unknown step '" + s + "' (see --list)");
}

inline void print_steps(const SumLesson& l) {
  for (int i = 0; i < l.count; ++i)
    std::printf("%-4s %-24s %s%s\n", step_label(l, i).c_str(), l.steps[i].name, l.steps[i].idea,
                l.steps[i].deterministic ? "" : " (float atomics: the last bits vary run to run)");
}

// Runs the chosen steps on one size: poison the output, run once and check against the float64
// sum, and time only a step whose check passed.
inline std::vector<Row> run_sum_shape(const SumLesson& l, std::size_t n, const std::vector<int>& steps, bool check,
                                      int reps, Timer& timer) {
  const std::vector<float> host = uniform_floats(n, -1.0, 1.0, seed_for(n));
  const SumRef ref = ref_sum(host.data(), n);
  const DeviceBuffer<float> x(host);
  DeviceBuffer<float> out(1);
  std::vector<Row> rows;
  for (int i : steps) {
    const SumStep& st = l.steps[i];
    Scratch scratch;  // each step's own: no step sees what another left in it
    auto launch = [&](cudaStream_t s) { st.launch(x.data(), n, out.data(), scratch, s); };
    Row row{step_label(l, i), st.name, "f32", "n=" + std::to_string(n), st.library};
    row.bytes = 4.0 * n;
    out.poison();
    launch(timer.stream());  // the check run, which is also the warm-up
    CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
    const float got = out.download(1)[0];
    row.err = check ? scaled_error(got, ref.sum, ref.abs_sum) : NAN;
    row.ok = !check || sum_close(got, ref, n);
    time_if_ok(timer, row, launch, TimingOptions{reps});
    rows.push_back(row);
  }
  return rows;
}

inline const char* kSumUsage = R"(usage: lessonNN [--n N] [--step I|name] [--reps R] [--csv FILE] [--sweep] [--no-check]
                [--dtype f32] [--list] [--help]

  --n N        number of floats (default 2^26 = 256 MiB, well over the L2 cache); N or 2^K
  --step S     run only step S (its number from --list, "lib", or its name); default: all
  --reps R     timed repetitions per step (default 30; steps slower than 200 ms get 3)
  --csv FILE   append one row per step to FILE (schema shared by all lessons)
  --sweep      run n = 2^10, 2^12, ..., 2^28 instead of one n
  --no-check   skip the comparison with the float64 reference (for profilers)
  --dtype f32  the only type in the reduction lessons
  --list       print the steps and exit
  --help       print this and exit

Exit codes: 0 ok, 1 a step FAILED its check or a CUDA error, 2 bad input, 77 no GPU.
)";

inline int sum_lesson_main(const SumLesson& l, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "lesson" << l.id << " - " << l.title << "\n\n" << kSumUsage;
      return 0;
    }
  }
  Cli cli(argc, argv);
  const bool list = cli.flag("list");
  const std::int64_t n = cli.size("n", std::int64_t{1} << 26);
  const auto step = cli.text("step");
  const int reps = static_cast<int>(std::min<std::int64_t>(cli.size("reps", 30), 100000));
  const auto csv = cli.text("csv");
  const bool sweep = cli.flag("sweep");
  const bool check = !cli.flag("no-check");
  cli.choice("dtype", "f32", {"f32"});
  cli.finish();

  std::vector<int> steps;
  if (step) steps.push_back(find_step(l, *step));
  else for (int i = 0; i < l.count; ++i) steps.push_back(i);
  if (list) {
    print_steps(l);
    return 0;
  }

  const DeviceInfo dev = device_info();
  std::vector<std::size_t> sizes;
  if (sweep) for (int e = 10; e <= 28; e += 2) sizes.push_back(std::size_t{1} << e);
  else sizes.push_back(static_cast<std::size_t>(n));
  ensure_fits(4.0 * sizes.back() + 2.0 * dev.l2_bytes, "n = " + std::to_string(sizes.back()) + " floats");

  Limits limits;
  limits.copy_gbps = measure_copy_gbps();
  std::printf("lesson%s - %s: sum of n floats\n", l.id, l.title);
  std::printf("device: %s, %d SMs, L2 %zu MiB, sm_%d%d\n", dev.name.c_str(), dev.sms, dev.l2_bytes >> 20, dev.cc_major,
              dev.cc_minor);
  std::printf("limit:  device-to-device copy %.0f GB/s (bytes read + written)\n", limits.copy_gbps);
  std::printf("error:  |GPU sum - float64 sum| / sum|x|;  [g] = timed by CUDA-graph replay\n");

  Timer timer(dev);
  std::vector<Row> all;
  for (std::size_t size : sizes) {
    std::printf("\nn = %zu (%.1f MiB); floor = read once at copy bandwidth = %.4f ms\n", size, 4.0 * size / (1 << 20),
                4.0 * size / (limits.copy_gbps * 1e9) * 1e3);
    std::vector<Row> rows = run_sum_shape(l, size, steps, check, reps, timer);
    // A sweep drops a step once it takes over a second per run: four times the n would cost minutes.
    for (const Row& r : rows) {
      if (sweep && r.ok && r.ms.median > 1000.0) {
        steps.erase(std::find(steps.begin(), steps.end(), find_step(l, r.step)));
        std::printf("(the sweep stops running step %s, %s, here: over 1 s per run)\n", r.step.c_str(), r.name.c_str());
      }
    }
    print_table(std::cout, rows, limits);
    if (l.extra && !step) {
      const std::vector<Row> more = l.extra(size, timer, reps);
      std::printf("\nthe same template, other operations (n = %zu):\n", size);
      print_table(std::cout, more, limits);
      rows.insert(rows.end(), more.begin(), more.end());
    }
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return finish_run(csv, l.id, all, limits, dev.name);
}

}  // namespace kl
