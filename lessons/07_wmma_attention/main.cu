// lesson07: runs the attention steps (attention.cuh) on the tile problem (Part A: B tiles of
// 16×16×16) and on long sequences (Part B: Q, K, V [B, H, S, D]), checks each against a reference,
// and times the ones that are right: Part A against the measured copy bandwidth (it moves 2 KiB per
// tile for 16 KFLOP), Part B against the tensor-core peak of a cuBLAS f16 GEMM measured in this run.
#include <algorithm>
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
#include "lessons/07_wmma_attention/attention.cuh"

namespace {

using lesson07::kSteps;
using lesson07::Part;
using lesson07::Problem;

const char* kUsage = R"(usage: lesson07 [--part tile|flash|both] [--batch B] [--heads H] [--seq S] [--dim D] [--causal]
                [--scale X] [--step I|name] [--reps N] [--csv FILE] [--sweep] [--no-check] [--list] [--help]

  --part P     tile: B independent 16x16x16 attentions (steps 1-4 and their library row);
               flash: Q, K, V [B, H, S, D] (steps 5-6 and their library row);
               both (the default) runs each part at its default shape
  --batch B    tile: the number of tiles (default 65536); flash: the batch (default 16); N or 2^E
  --heads H    flash: heads per batch entry (default 16)
  --seq S      flash: sequence length, any S >= 1 (default 4096)
  --dim D      flash: head dimension, 64 or 128 (default 64)
  --causal     flash: query i attends to keys j <= i only
  --scale X    softmax(Q K^T * X) (default 1/sqrt(D))
  --step S     run only step S (its number or name from --list); default: all steps of the part
  --reps N     timed repetitions per step (default 30; steps slower than 20 ms get 3)
  --csv FILE   append one row per step to FILE (schema shared by all lessons)
  --sweep      tile: B = 4096 and 65536; flash: S = 128 ... 16384 with B = 65536 / S, H = 16,
               for D = 64 and 128, causal and not
  --no-check   skip the comparison with the reference (for profilers)
  --list       print the steps and exit
  --help       print this and exit

Inputs are uniform in [-sqrt(3), sqrt(3)) (unit variance), f16; accumulation f32; output f16.
Checked against float64 on the CPU (tile) or an f32 GPU reference on ~4096 sampled rows (flash).
FLOPs counted: 4 B H S^2 D (half of it when causal). The library row of the flash part is n/a
where its materialised S and P (2 x B H S^2 f16) would exceed 16 GiB.
Exit codes: 0 ok, 1 a step FAILED its check or a CUDA error, 2 bad input, 77 no GPU.
)";

constexpr double kSlowMs = 20.0;

struct Run {
  std::vector<int> steps;  // indices into kSteps
  bool check = true;
  int reps = 30;
};

std::string shape_text(Part part, const Problem& p) {
  if (part == Part::tile) return "B=" + std::to_string(p.batch);
  return "BxHxSxD=" + std::to_string(p.batch) + "x" + std::to_string(p.heads) + "x" + std::to_string(p.seq) + "x" +
         std::to_string(p.dim) + (p.causal ? ";causal" : "");
}

// The steps named by --step (a number, a name, or "lib": the library row of the part(s) asked for).
std::vector<int> find_steps(const std::string& s, const std::vector<Part>& parts) {
  std::vector<int> found;
  for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i) {
    if (s != kSteps[i].name && s != kSteps[i].label) continue;
    if (std::find(parts.begin(), parts.end(), kSteps[i].part) != parts.end()) found.push_back(i);
    else throw kl::UsageError("step '" + s + "' belongs to --part " + lesson07::part_name(kSteps[i].part));
  }
  if (found.empty()) throw kl::UsageError("unknown step '" + s + "' (see --list)");
  return found;
}

// One shape: fresh inputs, the reference, then per step of the part: n/a (with the reason), or
// poison the output, run once, check, and time only a step that passed.
std::vector<kl::Row> run_shape(Part part, Problem p, const Run& run, kl::Timer& timer, const kl::Limits& limits) {
  const auto n = static_cast<std::size_t>(p.elements());
  kl::DeviceBuffer<__half> q(n), k(n), v(n), o(n);
  const auto salt = static_cast<std::uint64_t>(p.batch * 7919 + p.seq * 131 + p.dim + p.causal);
  lesson07::fill_uniform(q.data(), p.elements(), kl::seed_for(salt), 1.7320508f);
  lesson07::fill_uniform(k.data(), p.elements(), kl::seed_for(salt + 1), 1.7320508f);
  lesson07::fill_uniform(v.data(), p.elements(), kl::seed_for(salt + 2), 1.7320508f);
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.o = o.data();
  std::vector<std::int64_t> rows;
  std::vector<double> ref;
  if (run.check) {
    if (part == Part::tile) {  // the whole output, in float64 on the CPU
      ref = lesson07::reference(lesson07::to_floats(q.download()), lesson07::to_floats(k.download()),
                                lesson07::to_floats(v.download()), p);
      rows.resize(static_cast<std::size_t>(p.rows()));
      for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
    } else {
      rows = lesson07::sample_rows(p);
      ref = lesson07::reference_gpu(p, rows);
    }
  }
  if (part == Part::tile) {
    std::printf("\n%lld tiles of 16x16x16 f16: %.1f MiB moved; floor at copy bandwidth = %.4f ms\n",
                static_cast<long long>(p.batch), lesson07::bytes(p) / 1048576.0,
                lesson07::bytes(p) / (limits.copy_gbps * 1e9) * 1e3);
  } else {
    std::printf("\nB x H x S x D = %lld x %d x %d x %d%s, f16: %.1f GFLOP; at the tensor-core peak = %.4f ms\n",
                static_cast<long long>(p.batch), p.heads, p.seq, p.dim, p.causal ? ", causal" : "",
                lesson07::flops(p) / 1e9, lesson07::flops(p) / (limits.peak_tflops * 1e12) * 1e3);
  }
  lesson07::Workspace ws;
  std::vector<kl::Row> out;
  std::vector<std::string> notes;
  for (int i : run.steps) {
    const lesson07::AttentionStep& st = kSteps[i];
    if (st.part != part) continue;
    auto launch = [&](cudaStream_t s) { lesson07::run_step(st, p, ws, s); };
    o.poison();
    try {
      launch(timer.stream());  // the check run, which is also the warm-up
    } catch (const lesson07::NotSupported& e) {
      notes.push_back(std::string(st.label) + " " + st.name + ": n/a: " + e.what());
      continue;
    }
    CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
    kl::Row row{st.label, st.name, "f16", shape_text(part, p), st.library};
    if (part == Part::tile) row.bytes = lesson07::bytes(p);
    row.flops = lesson07::flops(p);
    kl::record_check(row, run.check, [&] { return lesson07::max_error(o.download(), ref, rows, p.dim); }, lesson07::kRel);
    kl::time_if_ok(timer, row, launch, kl::TimingOptions{run.reps, kSlowMs});
    out.push_back(row);
  }
  kl::print_table(std::cout, out, limits);
  for (const auto& note : notes) std::printf("%s\n", note.c_str());
  return out;
}

int lesson_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "lesson07 - attention O = softmax(Q K^T scale) V on the tensor cores: the 16x16 tile, then "
                   "flash attention\n\n"
                << kUsage;
      return 0;
    }
  }
  kl::Cli cli(argc, argv);
  const bool list = cli.flag("list");
  const bool sweep = cli.flag("sweep");
  const std::string part_text = cli.choice("part", "both", {"tile", "flash", "both"});
  const auto batch = cli.text("batch"), heads = cli.text("heads"), seq = cli.text("seq"), dim = cli.text("dim"),
             scale = cli.text("scale");
  const bool causal = cli.flag("causal");
  const auto step = cli.text("step");
  Run run;
  run.reps = static_cast<int>(std::min<std::int64_t>(cli.size("reps", 30), 100000));
  const auto csv = cli.text("csv");
  run.check = !cli.flag("no-check");
  cli.finish();

  // the shapes: checked before any GPU work
  Problem tile = lesson07::tile_problem(batch ? kl::Cli::parse_size("--batch", *batch) : lesson07::kDefaultTiles);
  Problem flash = lesson07::flash_problem(
      batch ? kl::Cli::parse_size("--batch", *batch) : lesson07::kSweepTokens / lesson07::kDefaultSeq,
      static_cast<int>(std::min<std::int64_t>(heads ? kl::Cli::parse_size("--heads", *heads) : lesson07::kDefaultHeads, 1 << 30)),
      static_cast<int>(std::min<std::int64_t>(seq ? kl::Cli::parse_size("--seq", *seq) : lesson07::kDefaultSeq, 1 << 30)),
      static_cast<int>(std::min<std::int64_t>(dim ? kl::Cli::parse_size("--dim", *dim) : lesson07::kDefaultDim, 1 << 30)),
      causal);
  if (scale) {
    char* end = nullptr;
    const double x = std::strtod(scale->c_str(), &end);
    if (end == scale->c_str() || *end != '\0' || !(x > 0) || !std::isfinite(static_cast<float>(x)))
      throw kl::UsageError("--scale must be a positive number (got '" + *scale + "')");
    tile.scale = flash.scale = static_cast<float>(x);
  }
  const bool flash_options = heads || seq || dim || causal;
  if (part_text == "tile" && flash_options) throw kl::UsageError("--heads, --seq, --dim and --causal belong to --part flash");
  if (part_text == "both" && (batch || flash_options))
    throw kl::UsageError("shape options need --part tile or --part flash (the default runs both parts at their defaults)");
  std::vector<Part> parts;
  if (part_text != "flash") parts.push_back(Part::tile);
  if (part_text != "tile") parts.push_back(Part::flash);

  if (step) {
    run.steps = find_steps(*step, parts);
  } else {
    for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i)
      if (std::find(parts.begin(), parts.end(), kSteps[i].part) != parts.end()) run.steps.push_back(i);
  }
  if (list) {
    for (const auto& st : kSteps)
      std::printf("%-4s %-22s %-6s %s\n", st.label, st.name, lesson07::part_name(st.part), st.idea);
    return 0;
  }
  if (sweep && (batch || flash_options || part_text != "both"))
    throw kl::UsageError("--sweep picks its own shapes: drop --part, --batch, --heads, --seq, --dim and --causal");
  std::vector<std::pair<Part, Problem>> shapes;
  if (sweep) {
    shapes = lesson07::sweep_shapes();
    if (scale)
      for (auto& sh : shapes) sh.second.scale = tile.scale;
  } else {
    for (Part part : parts) {
      bool wanted = false;
      for (int i : run.steps) wanted = wanted || kSteps[i].part == part;
      if (wanted) shapes.emplace_back(part, part == Part::tile ? tile : flash);
    }
  }
  for (const auto& [part, p] : shapes) lesson07::validate(p, part);

  const kl::DeviceInfo dev = kl::device_info();
  double most = 0;
  for (const auto& [part, p] : shapes) most = std::max(most, 4.0 * 2.0 * static_cast<double>(p.elements()));
  kl::ensure_fits(most + 2.0 * dev.l2_bytes, "Q, K, V and O");

  kl::Limits limits;
  limits.copy_gbps = kl::measure_copy_gbps();
  limits.peak_tflops = lesson07::measure_tensor_tflops();
  std::printf("lesson07 - attention on the tensor cores, f16 in, f32 accumulation, f16 out\n");
  std::printf("device: %s, %d SMs, L2 %zu MiB, sm_%d%d\n", dev.name.c_str(), dev.sms, dev.l2_bytes >> 20, dev.cc_major,
              dev.cc_minor);
  std::printf("limits: device-to-device copy %.0f GB/s (tile part); cuBLAS f16 GEMM 8192^3 %.0f TFLOP/s (flash part)\n",
              limits.copy_gbps, limits.peak_tflops);
  std::printf("error:  max |o - ref| / (|ref| + %.1f), passes at <= %.0e;  [g] = CUDA-graph replay\n", lesson07::kFloor,
              lesson07::kRel);

  kl::Timer timer(dev);
  std::vector<kl::Row> all;
  for (const auto& [part, p] : shapes) {
    const std::vector<kl::Row> rs = run_shape(part, p, run, timer, limits);
    all.insert(all.end(), rs.begin(), rs.end());
  }
  return kl::finish_run(csv, "07", all, limits, dev.name);
}

}  // namespace

int main(int argc, char** argv) {
  return kl::guarded_main("lesson07", [&] { return lesson_main(argc, argv); });
}
