// lesson05: runs every step of the softmax + top-K ladder (topk.cuh) on logits [R, V], checks each
// against a float64 reference, and times the ones that are right against the measured copy
// bandwidth (the floor: one read of the logits). A step that cannot take the shape says why (n/a).
#include <algorithm>
#include <climits>
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
#include "lessons/05_topk_fusion/topk.cuh"

namespace {

using lesson05::Dtype;
using lesson05::kSteps;
using lesson05::Shape;

const char* kUsage = R"(usage: lesson05 [--rows R] [--vocab V] [--k K] [--dtype f32|f16|bf16] [--step I|name] [--reps N]
                [--csv FILE] [--sweep] [--no-check] [--list] [--help]

  --rows R     rows of logits (default 4096); N or 2^E
  --vocab V    logits per row, the softmax dimension (default 50257)
  --k K        probabilities kept per row, 1 to 64 and at most V (default 10)
  --dtype D    f32, f16 or bf16 logits: loaded in D, arithmetic in f32, results in f32 (default f32)
  --step S     run only step S (its number from --list or its name); default: all
  --reps N     timed repetitions per step (default 30; steps slower than 20 ms get 3)
  --csv FILE   append one row per step to FILE (schema shared by all lessons)
  --sweep      R = 4096 with V in {32000, 50257, 128256} x K in {1, 10, 50}, K = 2 ... 64 at
               V = 50257, and the decode case R = 8, V = 128256, K = 50
  --no-check   skip the comparison with the float64 reference (for profilers)
  --list       print the steps and exit
  --help       print this and exit

Bytes counted (the floor): R * V logits read once + R * K (probability, index) pairs written.
Exit codes: 0 ok, 1 a step FAILED its check or a CUDA error, 2 bad input, 77 no GPU.
)";

std::string step_label(int i) { return std::to_string(i + 1); }

int find_step(const std::string& s) {
  for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i)
    if (s == kSteps[i].name || s == step_label(i)) return i;
  throw kl::UsageError("unknown step '" + s + "' (see --list)");
}

std::string shape_text(const Shape& sh) {
  return "RxVxK=" + std::to_string(sh.rows) + "x" + std::to_string(sh.vocab) + "x" + std::to_string(sh.k);
}

constexpr double kSlowMs = 20.0;  // step 1 takes tens of ms at V = 128256: three repetitions are enough

struct Run {
  std::vector<int> steps;
  bool check = true;
  int reps = 30;
};

// One shape: fresh logits rounded to T, the float64 reference, then per step: n/a (with the reason),
// or poison the outputs, run once, check, and time only a step that passed.
template <class T>
std::vector<kl::Row> run_shape(const Shape& sh, const Run& run, kl::Timer& timer, const kl::Limits& limits) {
  const Dtype dtype = lesson05::dtype_of<T>();
  const auto n = static_cast<std::size_t>(sh.rows * sh.vocab);
  const auto out = static_cast<std::size_t>(sh.rows * sh.k);
  std::vector<float> xf = kl::normal_floats(n, 0.0, 2.0, kl::seed_for(static_cast<std::uint64_t>(sh.vocab * 131 + sh.k)));
  std::vector<T> xt(n);
  kl::parallel_for(n, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      xt[i] = kl::from_float<T>(xf[i]);
      xf[i] = kl::to_float(xt[i]);  // the reference sees exactly what the GPU reads
    }
  });
  const lesson05::Reference ref = run.check ? lesson05::reference(xf, sh.rows, sh.vocab, sh.k) : lesson05::Reference{};
  const kl::DeviceBuffer<T> x(xt);
  kl::DeviceBuffer<float> prob(out);
  kl::DeviceBuffer<int> idx(out);
  lesson05::Workspace ws;
  const lesson05::Problem p{x.data(), prob.data(), idx.data(), sh.rows, sh.vocab, sh.k, dtype};
  const double bytes = static_cast<double>(n) * sizeof(T) + static_cast<double>(out) * 8.0;

  std::printf("\nR x V = %lld x %d %s, K = %d: %.1f MiB read; floor at copy bandwidth = %.4f ms\n",
              static_cast<long long>(sh.rows), sh.vocab, lesson05::dtype_name(dtype), sh.k, n * sizeof(T) / 1048576.0,
              bytes / (limits.copy_gbps * 1e9) * 1e3);
  std::vector<kl::Row> rows;
  std::vector<std::string> notes;
  for (int i : run.steps) {
    const lesson05::TopkStep& st = kSteps[i];
    auto launch = [&](cudaStream_t s) { lesson05::run_step(st, p, ws, s); };
    prob.poison();
    idx.poison();
    try {
      launch(timer.stream());  // the check run, which is also the warm-up and grows the workspace
    } catch (const lesson05::NotSupported& e) {
      notes.push_back(step_label(i) + " " + st.name + ": n/a: " + e.what());
      continue;
    }
    CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
    kl::Row row{step_label(i), st.name, lesson05::dtype_name(dtype), shape_text(sh), false};
    row.bytes = bytes;
    const lesson05::Tolerance tol = lesson05::tolerance(st.fused ? Dtype::f32 : dtype);
    kl::record_check(
        row, run.check, [&] { return lesson05::max_error(prob.download(out), idx.download(out), ref, xf, tol, st.fused); },
        tol.rel);
    kl::time_if_ok(timer, row, launch, kl::TimingOptions{run.reps, kSlowMs});
    rows.push_back(row);
  }
  kl::print_table(std::cout, rows, limits);
  for (const auto& note : notes) std::printf("%s\n", note.c_str());
  if (std::find(run.steps.begin(), run.steps.end(), lesson05::kDispatchStep - 1) != run.steps.end()) {
    const int chosen = lesson05::chosen_step(p);
    std::printf("%d dispatch ran step %d (%s)", lesson05::kDispatchStep, chosen, kSteps[chosen - 1].name);
    if (chosen == 6) std::printf(" with %d slices per row", lesson05::slice_count(sh.rows, sh.vocab, sh.k, kl::sm_count()));
    std::printf("\n");
  }
  return rows;
}

// The shape from --rows, --vocab and --k (defaults where not given), checked before any GPU work.
Shape parse_shape(const std::optional<std::string>& rows, const std::optional<std::string>& vocab_text,
                  const std::optional<std::string>& k_text) {
  Shape sh = lesson05::kDefaultShape;
  if (rows) sh.rows = kl::Cli::parse_size("--rows", *rows);
  const std::int64_t vocab = vocab_text ? kl::Cli::parse_size("--vocab", *vocab_text) : sh.vocab;
  const std::int64_t k = k_text ? kl::Cli::parse_size("--k", *k_text) : sh.k;
  if (vocab > INT_MAX) throw kl::UsageError("--vocab: V = " + std::to_string(vocab) + " is too large (at most 2^31 - 1)");
  if (k > lesson05::kMaxK) throw kl::UsageError("--k: K = " + std::to_string(k) + " is too large (at most 64)");
  if (k > vocab)
    throw kl::UsageError("--k: K = " + std::to_string(k) + " is larger than --vocab V = " + std::to_string(vocab) +
                         " (a row has only V probabilities)");
  if (static_cast<double>(sh.rows) * static_cast<double>(vocab) > 0x1p40)
    throw kl::UsageError("R * V = " + std::to_string(sh.rows) + " * " + std::to_string(vocab) + " is too large");
  sh.vocab = static_cast<int>(vocab);
  sh.k = static_cast<int>(k);
  return sh;
}

int lesson_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "lesson05 - fused softmax + top-K: the K most likely entries of each row of logits [R, V]\n\n"
                << kUsage;
      return 0;
    }
  }
  kl::Cli cli(argc, argv);
  const bool list = cli.flag("list");
  const bool sweep = cli.flag("sweep");
  const auto rows_text = cli.text("rows"), vocab_text = cli.text("vocab"), k_text = cli.text("k");
  const Shape shape = parse_shape(rows_text, vocab_text, k_text);
  const Dtype dtype = lesson05::parse_dtype(cli.text("dtype").value_or("f32"));
  const auto step = cli.text("step");
  Run run;
  run.reps = static_cast<int>(std::min<std::int64_t>(cli.size("reps", 30), 100000));
  const auto csv = cli.text("csv");
  run.check = !cli.flag("no-check");
  cli.finish();

  if (step) run.steps.push_back(find_step(*step));
  else for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i) run.steps.push_back(i);
  if (list) {
    for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i)
      std::printf("%-4s %-14s %s\n", step_label(i).c_str(), kSteps[i].name, kSteps[i].idea);
    return 0;
  }
  if (sweep && (rows_text || vocab_text || k_text)) throw kl::UsageError("--sweep picks its own shapes: drop --rows, --vocab and --k");
  const std::vector<Shape> shapes = sweep ? lesson05::sweep_shapes() : std::vector<Shape>{shape};

  const kl::DeviceInfo dev = kl::device_info();
  double most = 0;  // step 1 holds the logits, probabilities and their sorted copy, indices twice, cub's scratch
  for (const auto& sh : shapes)
    most = std::max(most, static_cast<double>(sh.rows) * sh.vocab * (3.0 * lesson05::dtype_bytes(dtype) + 16.0));
  kl::ensure_fits(most + 2.0 * dev.l2_bytes, "R * V logits with step 1's probabilities, indices and sort");

  kl::Limits limits;
  limits.copy_gbps = kl::measure_copy_gbps();
  std::printf("lesson05 - fused softmax + top-K of logits [R, V], %s\n", lesson05::dtype_name(dtype));
  std::printf("device: %s, %d SMs, L2 %zu MiB, sm_%d%d\n", dev.name.c_str(), dev.sms, dev.l2_bytes >> 20, dev.cc_major,
              dev.cc_minor);
  std::printf("limit:  device-to-device copy %.0f GB/s (bytes read + written)\n", limits.copy_gbps);
  std::printf("error:  max |p - ref| / (|ref| + abs/rel) over the K results, ref = float64 softmax; inf = a wrong index;\n"
              "        passes at <= %.0e (steps 2-7, float results) or the dtype's rounding (step 1);  [g] = CUDA-graph replay\n",
              lesson05::tolerance(Dtype::f32).rel);

  kl::Timer timer(dev);
  std::vector<kl::Row> all;
  for (const auto& sh : shapes) {
    lesson05::with_type(dtype, [&](auto t) {
      const std::vector<kl::Row> rs = run_shape<decltype(t)>(sh, run, timer, limits);
      all.insert(all.end(), rs.begin(), rs.end());
    });
  }
  return kl::finish_run(csv, "05", all, limits, dev.name);
}

}  // namespace

int main(int argc, char** argv) {
  return kl::guarded_main("lesson05", [&] { return lesson_main(argc, argv); });
}
