// lesson06: runs every step of the SGEMM ladder (gemm.cuh) on D = act(alpha A B + beta C + bias),
// checks each against a float64 reference, and times the ones that are right against the FP32 peak
// (SMs x 128 FMA x 2 x clock) and cuBLAS in the same run. Steps 1-6 and `cublas` compute
// alpha A B + beta C; step 7 and `cublas+epilogue` add the bias and the activation.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/random.hpp"
#include "common/report.hpp"
#include "common/timing.cuh"
#include "lessons/06_tiled_gemm/gemm.cuh"

namespace {

using lesson06::kSteps;
using lesson06::Problem;
using lesson06::Shape;

const char* kUsage = R"(usage: lesson06 [--m M] [--n N] [--k K] [--size S] [--alpha A] [--beta B] [--bias none|m|n|full]
                [--act none|relu|leaky|gelu_tanh|gelu_erf] [--slope S] [--dtype f32] [--step I|name]
                [--reps R]
                [--csv FILE] [--sweep] [--tune] [--no-check] [--list] [--help]

  --m, --n, --k   D is M x N, the inner dimension K (default 4096 each); N or 2^E
  --size S        M = N = K = S
  --alpha A       scales A B (default 1)
  --beta B        scales C (default 0: C is not read)
  --bias KIND     bias of step 7 and cublas+epilogue: per row (m), per column (n), a full M x N matrix,
                  or none (default n)
  --act F         activation of step 7 and cublas+epilogue (default gelu_tanh); --slope: LeakyReLU's
                  slope for x < 0 (default 0.01)
  --dtype f32      the only type (SGEMM)
  --step S        run only step S (its number from --list, or its name); default: all
  --reps R        timed repetitions per step (default 30; steps slower than 50 ms get 3)
  --csv FILE      append one row per step to FILE (schema shared by all lessons)
  --sweep         M = N = K = 256 ... 8192, and 4097^3, 1000 x 3000 x 777, 8192 x 64 x 8192
  --tune          time step 6's candidate tile configurations with K split 1, 2, 4, 8 ways, at the
                  shape (or the sweep's shapes)
  --no-check      skip the comparison with the float64 reference (for profilers)
  --list          print the steps and exit
  --help          print this and exit

FLOPs counted: 2 M N K. The limit: FP32 peak = SMs x 128 FMA/clock x 2 x the SM clock.
Exit codes: 0 ok, 1 a step FAILED its check or a CUDA error, 2 bad input, 77 no GPU.
)";

int find_step(const std::string& s) {
  for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i)
    if (s == kSteps[i].name || (!kSteps[i].library && s == std::to_string(i + 1))) return i;
  throw kl::UsageError("unknown step '" + s + "' (see --list)");
}

std::string shape_text(const Shape& sh) {
  return "MxNxK=" + std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k);
}

float parse_float(const std::string& what, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v) || std::fabs(v) > 3e38)
    throw kl::UsageError(what + " must be a finite number (got '" + s + "')");
  return static_cast<float>(v);
}

constexpr double kSlowMs = 50.0;  // the naive step takes ~0.1-1 s at 4096^3 - 8192^3: three repetitions

struct Run {
  std::vector<int> steps;
  bool check = true, tune = false;
  int reps = 30;
  float alpha = 1.f, beta = 0.f, slope = 0.01f;
  lesson06::Bias bias = lesson06::Bias::n;
  lesson06::Act act = lesson06::Act::gelu_tanh;
};

// The candidates `--tune` times at a shape, each with K split into 1, 2, 4 or 8 slices (D = A B, no
// epilogue; slices > 1 add the reduction kernel). lesson06::Tuned and SplitCfg are the winners.
template <class Cfg>
void launch_candidate(const Problem& p, int slices, lesson06::Workspace& ws, cudaStream_t s) {
  if (slices == 1) lesson06::launch_warp_tiled<Cfg, lesson06::Fused<lesson06::Bias::none, lesson06::Act::none, false>>(p, s);
  else lesson06::launch_split_k<Cfg>(p, slices, ws, s);
}

struct Candidate {
  const char* name;
  void (*launch)(const Problem& p, int slices, lesson06::Workspace& ws, cudaStream_t s);
};

// Config<BM, BN, BK, Q, S>: Q = 2 is 8x8 a thread, Q = 4 16x8; S stages.
inline constexpr Candidate kCandidates[] = {
    {"128x256x16 8x8", launch_candidate<lesson06::Config<128, 256, 16, 2, 3>>},
    {"256x128x16 8x8", launch_candidate<lesson06::Config<256, 128, 16, 2, 3>>},
    {"128x128x16 8x8", launch_candidate<lesson06::Config<128, 128, 16, 2, 3>>},
    {"128x128x16 8x8 S2", launch_candidate<lesson06::Config<128, 128, 16, 2, 2>>},
    {"128x128x32 8x8", launch_candidate<lesson06::Config<128, 128, 32, 2, 3>>},
    {"256x128x8 16x8", launch_candidate<lesson06::Config<256, 128, 8, 4, 3>>},
    {"256x128x16 16x8", launch_candidate<lesson06::Config<256, 128, 16, 4, 3>>},
    {"128x64x16 8x8", launch_candidate<lesson06::Config<128, 64, 16, 2, 3>>},
    {"64x64x16 8x8", launch_candidate<lesson06::Config<64, 64, 16, 2, 3>>},
};

std::string plan_text(const Shape& sh) {
  const bool aligned = sh.k % 4 == 0 && sh.n % 4 == 0;  // the executable's A and B start 16-byte aligned
  const lesson06::Plan pl = lesson06::plan(sh.m, sh.n, sh.k, kl::sm_count(), aligned);
  if (pl.path == lesson06::Path::naive) return "the naive kernel (tiny problem)";
  if (pl.path == lesson06::Path::tiled) return "the tuned warp-tiled kernel, 128x256x16 tiles, 8x8 per thread";
  if (pl.path == lesson06::Path::unaligned) return "the warp-tiled kernel with 128x64x16 tiles (rows of A or B not 16-byte aligned)";
  if (pl.path == lesson06::Path::small_tiles) return "the warp-tiled kernel with 128x64x16 tiles (few 128x256 tiles, K too short to split)";
  return "split-K over " + std::to_string(pl.slices) + " slices, 128x64x16 tiles, + the reduction";
}

// One shape's inputs on the host and the device, and its float64 reference.
struct Inputs {
  std::vector<float> a, b;
  lesson06::HostInputs host;
  kl::DeviceBuffer<float> da, db, dc, dbias, dd;
  lesson06::Reference ref;
  Problem p;
};

void make_inputs(Inputs& in, const Shape& sh, const Run& run, lesson06::Workspace& ws) {
  const std::uint64_t seed = kl::seed_for(static_cast<std::uint64_t>(sh.m) * 7919 + sh.n * 131 + sh.k);
  const auto mk = static_cast<std::size_t>(sh.m) * sh.k, kn = static_cast<std::size_t>(sh.k) * sh.n,
             mn = static_cast<std::size_t>(sh.m) * sh.n;
  in.a = kl::normal_floats(mk, 0, 1, seed);
  in.b = kl::normal_floats(kn, 0, 1, seed + 1);
  if (run.beta != 0.f) in.host.c = kl::normal_floats(mn, 0, 1, seed + 2);
  const std::size_t nbias = run.bias == lesson06::Bias::m ? sh.m : run.bias == lesson06::Bias::n ? sh.n : mn;
  if (run.bias != lesson06::Bias::none) in.host.bias = kl::normal_floats(nbias, 0, 1, seed + 3);
  in.da.upload(in.a);
  in.db.upload(in.b);
  if (!in.host.c.empty()) in.dc.upload(in.host.c);
  if (!in.host.bias.empty()) in.dbias.upload(in.host.bias);
  in.dd.resize(mn);
  Problem& p = in.p;
  p = Problem{in.da.data(), in.db.data(), in.host.c.empty() ? nullptr : in.dc.data(), in.dd.data(),
              in.host.bias.empty() ? nullptr : in.dbias.data(), sh.m, sh.n, sh.k, sh.k, sh.n, sh.n, sh.n};
  p.alpha = run.alpha;
  p.beta = run.beta;
  p.bias_kind = run.bias;
  p.act = run.act;
  p.slope = run.slope;
  if (run.check) in.ref = lesson06::reference(in.a.data(), sh.k, in.b.data(), sh.n, sh.m, sh.n, sh.k, ws);
}

// Poisons D, runs once, checks against the reference (p or its plain part), times only if right.
template <class Launch>
kl::Row measure(Inputs& in, const Problem& checked, kl::Row row, const Run& run, kl::Timer& timer, Launch&& launch) {
  in.dd.poison();
  launch(timer.stream());  // the check run, which also warms up and grows the workspace
  CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
  row.flops = 2.0 * checked.m * checked.n * checked.k;
  kl::record_check(
      row, run.check,
      [&] { return lesson06::max_error(in.dd.download(static_cast<std::size_t>(checked.m) * checked.n), checked, in.ref, in.host); },
      lesson06::tolerance(checked.k));
  kl::time_if_ok(timer, row, launch, kl::TimingOptions{run.reps, kSlowMs});
  return row;
}

std::vector<kl::Row> run_shape(const Shape& sh, const Run& run, kl::Timer& timer, const kl::Limits& limits,
                               lesson06::Workspace& ws) {
  Inputs in;
  make_inputs(in, sh, run, ws);
  const double flops = 2.0 * sh.m * sh.n * sh.k;
  std::printf("\nM x N x K = %d x %d x %d, alpha %g, beta %g; epilogue of step 7: bias %s, %s\n", sh.m, sh.n, sh.k,
              run.alpha, run.beta, lesson06::bias_name(run.bias), lesson06::act_name(run.act));
  std::printf("%.3g GFLOP; floor at the FP32 peak = %.4f ms\n", flops / 1e9, flops / (limits.peak_tflops * 1e12) * 1e3);
  std::vector<kl::Row> rows;
  if (run.tune) {
    const Problem p = lesson06::plain(in.p);
    for (const auto& cand : kCandidates) {
      for (int slices : {1, 2, 4, 8}) {
        if (slices > 1 && sh.k / slices < 64) continue;
        kl::Row row{"tune", std::string(cand.name) + " split " + std::to_string(slices), "f32", shape_text(sh)};
        rows.push_back(measure(in, p, row, run, timer, [&](cudaStream_t s) { cand.launch(p, slices, ws, s); }));
      }
    }
  } else {
    for (int i : run.steps) {
      const lesson06::GemmStep& st = kSteps[i];
      std::string name = st.name;
      if (st.epilogue) name += std::string("[bias ") + lesson06::bias_name(run.bias) + " " + lesson06::act_name(run.act) + "]";
      kl::Row row{lesson06::step_label(i), name, "f32", shape_text(sh), st.library};
      const Problem checked = st.epilogue ? in.p : lesson06::plain(in.p);
      rows.push_back(measure(in, checked, row, run, timer, [&](cudaStream_t s) { lesson06::run_step(st, in.p, ws, s); }));
    }
  }
  kl::print_table(std::cout, rows, limits);
  std::printf("steps 6-7 ran %s\n", plan_text(sh).c_str());
  return rows;
}

// The shape from --size or --m, --n, --k (defaults where not given), checked before any GPU work.
Shape parse_shape(kl::Cli& cli, bool& given) {
  const auto size = cli.text("size"), m = cli.text("m"), n = cli.text("n"), k = cli.text("k");
  given = size || m || n || k;
  if (size && (m || n || k)) throw kl::UsageError("--size sets M, N and K: give either --size or --m/--n/--k");
  const auto dim = [&](const char* what, const std::optional<std::string>& v, int fallback) {
    const std::optional<std::string>& t = size ? size : v;
    if (!t) return fallback;
    const std::int64_t x = kl::Cli::parse_size(std::string("--") + (size ? "size" : what), *t);
    if (x > INT_MAX) throw kl::UsageError(std::string("--") + what + ": " + *t + " is too large (at most 2^31 - 1)");
    return static_cast<int>(x);
  };
  Shape sh{dim("m", m, lesson06::kDefaultShape.m), dim("n", n, lesson06::kDefaultShape.n),
           dim("k", k, lesson06::kDefaultShape.k)};
  if (sh.m > lesson06::kMaxRows) throw kl::UsageError("--m: M = " + std::to_string(sh.m) + " is too large (at most 2^19)");
  return sh;
}

int lesson_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "lesson06 - tiled SGEMM with double buffering and a fused epilogue:\n"
                   "           D = act(alpha A B + beta C + bias), float32, row-major\n\n"
                << kUsage;
      return 0;
    }
  }
  kl::Cli cli(argc, argv);
  const bool list = cli.flag("list");
  const bool sweep = cli.flag("sweep");
  bool shape_given = false;
  const Shape shape = parse_shape(cli, shape_given);
  Run run;
  if (auto v = cli.text("alpha")) run.alpha = parse_float("--alpha", *v);
  if (auto v = cli.text("beta")) run.beta = parse_float("--beta", *v);
  if (auto v = cli.text("slope")) run.slope = parse_float("--slope", *v);
  run.bias = lesson06::parse_bias(cli.text("bias").value_or("n"));
  run.act = lesson06::parse_act(cli.text("act").value_or("gelu_tanh"));
  const auto step = cli.text("step");
  run.reps = static_cast<int>(std::min<std::int64_t>(cli.size("reps", 30), 100000));
  const auto csv = cli.text("csv");
  run.check = !cli.flag("no-check");
  run.tune = cli.flag("tune");
  cli.finish();

  if (step) run.steps.push_back(find_step(*step));
  else for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i) run.steps.push_back(i);
  if (list) {
    for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i)
      std::printf("%-4s %-16s %s\n", lesson06::step_label(i).c_str(), kSteps[i].name, kSteps[i].idea);
    return 0;
  }
  if (sweep && shape_given) throw kl::UsageError("--sweep picks its own shapes: drop --size, --m, --n and --k");
  const std::vector<Shape> shapes = sweep ? lesson06::sweep_shapes() : std::vector<Shape>{shape};

  const kl::DeviceInfo dev = kl::device_info();
  double most = 0;  // A, B, C, D and bias in float, split-K's slices, the float64 reference's operands
  for (const auto& sh : shapes) {
    const double mk = double(sh.m) * sh.k, kn = double(sh.k) * sh.n, mn = double(sh.m) * sh.n;
    most = std::max(most, 4.0 * (mk + kn + 3 * mn) + 4.0 * 16 * mn * (sh.n <= 1024) + 8.0 * (mk + kn + mn));
  }
  kl::ensure_fits(most + 2.0 * dev.l2_bytes + (64 << 20), "M x N x K = " + shape_text(shapes.back()));

  kl::Limits limits;
  limits.copy_gbps = kl::measure_copy_gbps();
  limits.peak_tflops = dev.peak_fp32_tflops();
  std::printf("lesson06 - SGEMM D = act(alpha A B + beta C + bias), float32, row-major\n");
  std::printf("device: %s, %d SMs at %.2f GHz, L2 %zu MiB, sm_%d%d\n", dev.name.c_str(), dev.sms, dev.sm_clock_khz / 1e6,
              dev.l2_bytes >> 20, dev.cc_major, dev.cc_minor);
  std::printf("limit:  FP32 peak %.1f TFLOP/s (%d SMs x 128 FMA x 2 x clock); copy %.0f GB/s\n", limits.peak_tflops,
              dev.sms, limits.copy_gbps);
  std::printf("error:  max |D - ref| / (|alpha| sum|a b| + |beta c| + |bias|), ref = float64; passes at <= "
              "(min(K, 16 sqrt K) + 8) eps;  [g] = CUDA-graph replay\n");

  kl::Timer timer(dev);
  lesson06::Workspace ws;
  std::vector<kl::Row> all;
  for (const auto& sh : shapes) {
    const std::vector<kl::Row> rs = run_shape(sh, run, timer, limits, ws);
    all.insert(all.end(), rs.begin(), rs.end());
  }
  return kl::finish_run(csv, "06", all, limits, dev.name);
}

}  // namespace

int main(int argc, char** argv) {
  return kl::guarded_main("lesson06", [&] { return lesson_main(argc, argv); });
}
