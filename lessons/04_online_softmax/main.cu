// lesson04: runs every step of the softmax ladder (softmax.cuh) on an [M, K] matrix, checks each
// against a float64 softmax, and times the ones that are right against the measured copy bandwidth
// and cuDNN. A step that cannot handle the shape says why and is shown as n/a.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/parallel.hpp"
#include "common/random.hpp"
#include "common/report.hpp"
#include "common/timing.cuh"
#include "lessons/04_online_softmax/softmax.cuh"

namespace {

using lesson04::Dtype;
using lesson04::kSteps;

const char* kUsage = R"(usage: lesson04 [--rows M] [--cols K] [--dtype f32|f16|bf16] [--step I|name] [--reps R]
                [--csv FILE] [--sweep] [--no-check] [--list] [--help]

  --rows M     rows (default: 2^26 / K, so M * K = 2^26 elements, well over the L2 cache)
  --cols K     row length, the softmax dimension (default 4096); N or 2^E
  --dtype D    f32, f16 or bf16: loads and stores in D, arithmetic in f32 (default f32)
  --step S     run only step S (its number from --list, "lib", or its name); default: all
  --reps R     timed repetitions per step (default 30; steps slower than 20 ms get 3)
  --csv FILE   append one row per step to FILE (schema shared by all lessons)
  --sweep      run K = 32 ... 131072 (powers of two) and 1000, 4097, 50257, each with M = 2^26 / K
  --no-check   skip the comparison with the float64 reference (for profilers)
  --list       print the steps and exit
  --help       print this and exit

Bytes counted: M * K elements read + M * K written. Exit codes: 0 ok, 1 a step FAILED its check
or a CUDA error, 2 bad input, 77 no GPU.
)";

std::string step_label(int i) { return kSteps[i].library ? "lib" : std::to_string(i + 1); }

int find_step(const std::string& s) {
  for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i)
    if (s == kSteps[i].name || s == step_label(i)) return i;
  throw kl::UsageError("unknown step '" + s + "' (see --list)");
}

std::string shape_text(std::int64_t rows, std::int64_t cols) {
  return "MxK=" + std::to_string(rows) + "x" + std::to_string(cols);
}

// Step 1 takes 10-80 ms at K >= 16384 and changes no conclusion: three repetitions of it are enough,
// and save the sweep ~10 s.
constexpr double kSlowMs = 20.0;

struct Run {
  std::vector<int> steps;
  bool check = true;
  int reps = 30;
};

// One shape in one dtype: fresh inputs rounded to T, the float64 reference, then per step: n/a
// (with the reason), or poison the output, run once, check, and time only a step that passed.
template <class T>
std::vector<kl::Row> run_shape(std::int64_t rows, std::int64_t cols, const Run& run, kl::Timer& timer,
                               const kl::Limits& limits) {
  const Dtype dtype = lesson04::dtype_of<T>();
  const auto n = static_cast<std::size_t>(rows * cols);
  std::vector<float> xf = kl::normal_floats(n, 0.0, 2.0, kl::seed_for(static_cast<std::uint64_t>(cols)));
  std::vector<T> xt(n);
  kl::parallel_for(n, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      xt[i] = kl::from_float<T>(xf[i]);
      xf[i] = kl::to_float(xt[i]);  // the reference sees exactly what the GPU reads
    }
  });
  const std::vector<double> ref = run.check ? lesson04::ref_softmax(xf, rows, cols) : std::vector<double>{};
  const lesson04::Tolerance tol = lesson04::tolerance(dtype);
  const kl::DeviceBuffer<T> x(xt);
  kl::DeviceBuffer<T> y(n);
  lesson04::Workspace ws;
  const lesson04::Problem p{x.data(), y.data(), rows, cols, dtype, 1.f};

  std::printf("\nM x K = %lld x %lld %s: %.1f MiB read + %.1f MiB written; floor at copy bandwidth = %.4f ms\n",
              static_cast<long long>(rows), static_cast<long long>(cols), lesson04::dtype_name(dtype),
              n * sizeof(T) / 1048576.0, n * sizeof(T) / 1048576.0, 2.0 * n * sizeof(T) / (limits.copy_gbps * 1e9) * 1e3);
  std::vector<kl::Row> out;
  std::vector<std::string> notes;
  for (int i : run.steps) {
    const lesson04::SoftmaxStep& st = kSteps[i];
    const std::string label = step_label(i);
    std::string why = st.support(p, lesson04::device_caps());
    auto launch = [&](cudaStream_t s) { st.launch(p, ws, s); };
    y.poison();
    if (why.empty()) {
      try {
        launch(timer.stream());  // the check run, which is also the warm-up
      } catch (const lesson04::NotSupported& e) {
        why = e.what();
      }
    }
    if (!why.empty()) {
      notes.push_back(label + " " + st.name + ": n/a for K=" + std::to_string(cols) + " " +
                      lesson04::dtype_name(dtype) + ": " + why);
      continue;
    }
    CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
    kl::Row row{label, st.name, lesson04::dtype_name(dtype), shape_text(rows, cols), st.library};
    row.bytes = 2.0 * n * sizeof(T);
    kl::record_check(row, run.check, [&] { return lesson04::max_error(y.download(n), ref, tol); }, tol.rel);
    kl::time_if_ok(timer, row, launch, kl::TimingOptions{run.reps, kSlowMs});
    out.push_back(row);
  }
  kl::print_table(std::cout, out, limits);
  for (const auto& note : notes) std::printf("%s\n", note.c_str());
  if (std::find(run.steps.begin(), run.steps.end(), lesson04::kDispatchStep - 1) != run.steps.end()) {
    const int pack = kl::widest_pack(p.x, p.y, cols, sizeof(T));
    const int chosen = lesson04::chosen_step(p);
    std::printf("%d dispatch ran step %d (%s): K=%lld %s, pack %d\n", lesson04::kDispatchStep, chosen,
                kSteps[chosen - 1].name, static_cast<long long>(cols), lesson04::dtype_name(dtype), pack);
  }
  return out;
}

int lesson_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "lesson04 - online softmax: softmax of each row of an [M, K] matrix\n\n" << kUsage;
      return 0;
    }
  }
  kl::Cli cli(argc, argv);
  const bool list = cli.flag("list");
  const auto rows_text = cli.text("rows");
  const auto cols_text = cli.text("cols");
  const Dtype dtype = lesson04::parse_dtype(cli.text("dtype").value_or("f32"));
  const auto step = cli.text("step");
  Run run;
  run.reps = static_cast<int>(std::min<std::int64_t>(cli.size("reps", 30), 100000));
  const auto csv = cli.text("csv");
  const bool sweep = cli.flag("sweep");
  run.check = !cli.flag("no-check");
  cli.finish();

  if (step) run.steps.push_back(find_step(*step));
  else for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i) run.steps.push_back(i);
  if (list) {
    for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i)
      std::printf("%-4s %-16s %s\n", step_label(i).c_str(), kSteps[i].name, kSteps[i].idea);
    return 0;
  }

  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
  if (sweep) {
    if (rows_text || cols_text) throw kl::UsageError("--sweep picks its own shapes: drop --rows and --cols");
    shapes = lesson04::sweep_shapes();
  } else {
    const std::int64_t cols = cols_text ? kl::Cli::parse_size("--cols", *cols_text) : 4096;
    if (cols > INT_MAX) throw kl::UsageError("--cols: K = " + std::to_string(cols) + " is too large (at most 2^31 - 1)");
    const std::int64_t rows = rows_text ? kl::Cli::parse_size("--rows", *rows_text) : lesson04::default_rows(cols);
    if (static_cast<double>(rows) * static_cast<double>(cols) > 0x1p40)
      throw kl::UsageError("M * K = " + std::to_string(rows) + " * " + std::to_string(cols) + " is too large");
    shapes.emplace_back(rows, cols);
  }

  const kl::DeviceInfo dev = kl::device_info();
  std::int64_t most = 0;
  for (const auto& [m, k] : shapes) most = std::max(most, m * k);
  kl::ensure_fits(2.0 * most * lesson04::dtype_bytes(dtype) + 2.0 * dev.l2_bytes,
                  "M * K = " + std::to_string(most) + " elements in and out");

  kl::Limits limits;
  limits.copy_gbps = kl::measure_copy_gbps();
  const lesson04::Tolerance tol = lesson04::tolerance(dtype);
  std::printf("lesson04 - online softmax: softmax of each row of an [M, K] matrix, %s\n", lesson04::dtype_name(dtype));
  std::printf("device: %s, %d SMs, L2 %zu MiB, %zu KiB shared memory per block, sm_%d%d\n", dev.name.c_str(), dev.sms,
              dev.l2_bytes >> 20, dev.smem_per_block_optin >> 10, dev.cc_major, dev.cc_minor);
  std::printf("limit:  device-to-device copy %.0f GB/s (bytes read + written)\n", limits.copy_gbps);
  std::printf("error:  max |y - ref| / (|ref| + %.0e), ref = float64 softmax; passes at <= %.1e;  [g] = CUDA-graph replay\n",
              tol.abs / tol.rel, tol.rel);

  kl::Timer timer(dev);
  std::vector<kl::Row> all;
  for (const auto& sh : shapes) {
    const std::int64_t rows = sh.first, cols = sh.second;
    lesson04::with_type(dtype, [&](auto t) {
      const std::vector<kl::Row> rs = run_shape<decltype(t)>(rows, cols, run, timer, limits);
      all.insert(all.end(), rs.begin(), rs.end());
    });
  }
  return kl::finish_run(csv, "04", all, limits, dev.name);
}

}  // namespace

int main(int argc, char** argv) {
  return kl::guarded_main("lesson04", [&] { return lesson_main(argc, argv); });
}
