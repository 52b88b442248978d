// The ladder driver every lesson's executable uses. A lesson hands it a table of steps, the options
// that choose its shape, and a function that runs the chosen steps on one shape; the driver does the
// rest once for all lessons: --help, --list, --step, --reps, --csv, --sweep, --no-check, --profile, --dtype,
// validating every option before any GPU work, the device and limit lines, and the CSV.
//
// The measure loop (ladder_main, run_steps, measure_steps), in short:
//   parse the command line; refuse bad input (exit 2) before any GPU work; --list prints the table
//   limits = the measured copy bandwidth (+ the lesson's measure_limits); print them and the legend
//   for each shape (one, or the sweep's): the lesson's run makes inputs and the reference, then
//     for each chosen step:
//       n/a if its needs_sm is newer than the GPU, or its launcher throws NotSupported
//       poison the output; run the step once; error = compare the output with the reference
//       error <= tolerance ? time it (L2 flushed, median of reps, a CUDA graph if short) : FAILED
//     print the table of the shape
//   append every row (and the copy as a row) to --csv; exit 1 if any step FAILED
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/check.cuh"
#include "common/cli.hpp"
#include "common/report.hpp"
#include "common/step.hpp"
#include "common/timing.cuh"

namespace kl {

// A lesson option: a size ("--rows 4096", "2^12"), a text ("--part tile") or a flag ("--causal").
struct Option {
  enum Kind { size, text, flag };
  const char* name;
  Kind kind;
  const char* help;   // the --help line after the name
  bool shape = true;  // true: chooses the shape, so it cannot be combined with --sweep
};

// The parsed command line a lesson reads its options from.
struct Args {
  std::map<std::string, std::int64_t> sizes;
  std::map<std::string, std::string> texts;
  std::map<std::string, bool> flags;
  std::string dtype;
  std::optional<std::string> step;  // --step as given (the driver resolves it; a lesson may check it)
  bool sweep = false;

  std::optional<std::int64_t> size(const std::string& name) const {
    auto it = sizes.find(name);
    return it == sizes.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
  }
  std::optional<std::string> text(const std::string& name) const {
    auto it = texts.find(name);
    return it == texts.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  bool flag(const std::string& name) const { return flags.count(name) > 0; }
  bool given(const std::string& name) const { return sizes.count(name) || texts.count(name) || flags.count(name); }
};

// Everything a lesson's run function needs for one shape.
template <class Launch>
struct Context {
  const std::vector<Step<Launch>>& steps;  // the whole table
  std::vector<int> chosen;                 // indices of the steps to run, in table order
  const Args& args;
  const DeviceInfo& dev;
  Limits limits;
  Timer& timer;
  bool check = true;
  int reps = 30;
  double slow_ms = 20.0;        // a step slower than this is timed 3 times
  double warmup_ms = 0;         // each step runs this long before it is timed (TimingOptions::warmup_ms)
  double graph_below_ms = 0.1;  // TimingOptions::graph_below_ms: 0 never replays a CUDA graph
};

template <class Launch, class Shape>
struct Lesson {
  const char* id;     // "04"
  const char* title;  // "online softmax: softmax of each row of an [M, K] matrix"
  std::vector<Step<Launch>> steps;
  std::vector<Option> options;
  std::vector<std::string> dtypes = {"f32"};  // the first is the default
  const char* sweep_help = "";                // what --sweep runs
  const char* notes = "";                     // --help text after the options
  double slow_ms = 20.0;
  double warmup_ms = 0;  // see TimingOptions::warmup_ms: compute-bound lessons set it
  // Steps faster than this are timed by CUDA-graph replay (TimingOptions::graph_below_ms); 0: never, for a
  // lesson whose steps cannot all be captured (lesson 10's cudaMemcpyPeerAsync).
  double graph_below_ms = 0.1;
  // The shapes of this run from the options (one shape, or the sweep's when args.sweep); throws
  // UsageError for a bad combination. Runs before any GPU work.
  std::function<std::vector<Shape>(const Args&)> shapes;
  // Device memory one shape needs (checked against free memory before anything runs).
  std::function<double(const Shape&, const Args&)> device_bytes;
  // Optional: host memory one shape needs (inputs, references, downloads), checked against the
  // memory available; without it, device_bytes (the host holds at least what it uploads).
  std::function<double(const Shape&, const Args&)> host_bytes;
  // Optional: measures more limits (e.g. a tensor-core peak) and prints their line.
  std::function<void(Limits&, const DeviceInfo&)> measure_limits;
  // Optional: the legend printed under the limits, how the error column is measured and when a step
  // passes ("error: ..."), for this run's options (lesson 04's depends on --dtype).
  std::function<std::string(const Args&)> legend;
  // Checks and times the chosen steps on one shape (usually through run_steps below).
  std::function<std::vector<Row>(const Shape&, Context<Launch>&)> run;
};

// What a lesson supplies to run_steps for one shape: the row every step's result starts from
// (dtype, shape text, bytes or FLOPs), how to poison the output, run a step, and measure its error.
struct Trial {
  Row proto;
  std::function<void()> poison;
  std::function<double()> error;  // max error of the output against the reference
  double tolerance;               // a step passes at error <= tolerance
};

// The rows of some chosen steps on one trial, and the n/a notes; run_steps prints them.
struct Measured {
  std::vector<Row> rows;
  std::vector<std::string> notes;
};

// Per step of `which`: poison the output, run it once (the check run, also the warm-up), check it
// against the reference, and time it only if it passed. A step whose needs_sm is newer than the GPU,
// or whose launcher throws NotSupported (e.g. kl::arch_missing: compiled out of this build), is n/a
// with its reason.
template <class Launch, class RunStep>
Measured measure_steps(Context<Launch>& cx, const std::vector<int>& which, const Trial& t, RunStep&& run_step) {
  Measured m;
  for (int i : which) {
    const Step<Launch>& st = cx.steps[i];
    const int cc = cx.dev.cc_major * 10 + cx.dev.cc_minor;
    if (st.needs_sm > cc) {
      m.notes.push_back(step_label(cx.steps, i) + " " + st.name + ": n/a: needs sm_" + std::to_string(st.needs_sm) +
                        (st.arch_specific ? "a" : "") + " (this GPU is sm_" + std::to_string(cc) + ")");
      continue;
    }
    auto launch = [&](cudaStream_t s) { run_step(st, s); };
    t.poison();
    try {
      launch(cx.timer.stream());
    } catch (const NotSupported& e) {
      m.notes.push_back(step_label(cx.steps, i) + " " + st.name + ": n/a: " + e.what());
      continue;
    }
    CUDA_CHECK(cudaStreamSynchronize(cx.timer.stream()));
    Row row = t.proto;
    row.step = step_label(cx.steps, i);
    row.name = st.name;
    row.library = st.library;
    record_check(row, cx.check, t.error, t.tolerance);
    time_if_ok(cx.timer, row, launch, TimingOptions{cx.reps, cx.slow_ms, cx.graph_below_ms, cx.warmup_ms});
    m.rows.push_back(row);
  }
  return m;
}

inline void print_measured(const Measured& m, const Limits& l) {
  print_table(std::cout, m.rows, l);
  for (const auto& note : m.notes) std::printf("%s\n", note.c_str());
}

// Every chosen step on one trial (measure_steps), then the table and the n/a notes; returns the rows.
template <class Launch, class RunStep>
std::vector<Row> run_steps(Context<Launch>& cx, const Trial& t, RunStep&& run_step) {
  const Measured m = measure_steps(cx, cx.chosen, t, run_step);
  print_measured(m, cx.limits);
  return m.rows;
}

// ---- the command line ------------------------------------------------------------------------------

template <class Launch, class Shape>
void print_usage(const Lesson<Launch, Shape>& l) {
  std::string dtypes;
  for (const auto& d : l.dtypes) dtypes += (dtypes.empty() ? "" : "|") + d;
  std::printf("lesson%s - %s\n\nusage: lesson%s", l.id, l.title, l.id);
  for (const auto& o : l.options)
    std::printf(" [--%s%s]", o.name, o.kind == Option::flag ? "" : o.kind == Option::size ? " N" : " X");
  std::printf(
      " [--dtype %s] [--step I|name] [--reps R] [--csv FILE] [--sweep] [--no-check] [--profile] [--list] [--help]\n\n",
      dtypes.c_str());
  for (const auto& o : l.options) {
    const std::string flag = std::string(o.name) + (o.kind == Option::size ? " N" : o.kind == Option::text ? " X" : "");
    std::printf("  --%-10s %s\n", flag.c_str(), o.help);
  }
  std::printf("  --%-10s element type of inputs and outputs: %s (default %s)\n", "dtype", dtypes.c_str(),
              l.dtypes[0].c_str());
  std::printf("  --%-10s run only step S (its number from --list, \"lib\", or its name); default: all\n", "step S");
  std::printf("  --%-10s timed repetitions per step (default 30; steps slower than %g ms get 3)\n", "reps R",
              l.slow_ms);
  std::printf("  --%-10s append one row per step to FILE (schema shared by all lessons)\n", "csv FILE");
  std::printf("  --%-10s %s\n", "sweep", l.sweep_help);
  std::printf("  --%-10s skip the comparison with the reference (for profilers)\n", "no-check");
  std::printf(
      "  --%-10s run each step once between cudaProfilerStart/Stop, timing nothing (for\n"
      "  %-12s ncu --profile-from-start off, as scripts/profile.sh does)\n",
      "profile", "");
  std::printf("  --%-10s print the steps and exit\n  --%-10s print this and exit\n\n", "list", "help");
  std::printf("%s%sExit codes: 0 ok, 1 a step FAILED its check or a CUDA error, 2 bad input, 77 no GPU.\n", l.notes,
              *l.notes ? "\n" : "");
}

// Refuses (exit 2) a problem whose host buffers would not fit in the memory available now
// (MemAvailable of /proc/meminfo), before an allocation fails or the machine swaps half-way.
inline void ensure_host_fits(double bytes, const std::string& what) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  long long kib = -1;
  while (meminfo >> key) {
    if (key == "MemAvailable:") {
      meminfo >> kib;
      break;
    }
    meminfo.ignore(256, '\n');
  }
  if (kib < 0) return;  // not Linux, or no figure: nothing to check against
  const double available = static_cast<double>(kib) * 1024.0;
  if (bytes > 0.9 * available)
    throw UsageError(what + " needs " + std::to_string(static_cast<long long>(bytes / (1 << 20))) +
                     " MiB of host memory but only " + std::to_string(kib >> 10) + " MiB are available");
}

template <class Launch>
void print_steps(const std::vector<Step<Launch>>& steps) {
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    const auto& st = steps[i];
    std::printf("%-4s %-24s %-8s %s%s%s\n", step_label(steps, i).c_str(), st.name, needs_text(st).c_str(),
                st.part ? "[" : "", st.part ? (std::string(st.part) + "] ").c_str() : "", st.idea);
  }
}

// "--step 3", "--step name" or "--step lib" -> the matching indices (several libs may match "lib").
template <class Launch>
std::vector<int> find_steps(const std::vector<Step<Launch>>& steps, const std::string& s) {
  std::vector<int> found;
  for (int i = 0; i < static_cast<int>(steps.size()); ++i)
    if (s == steps[i].name || s == step_label(steps, i)) found.push_back(i);
  if (found.empty()) throw UsageError("unknown step '" + escaped(s) + "' (see --list)");
  return found;
}

// A CSV path is checked before any GPU work (check(): a folder, a pipe, a device, or a file or folder
// this user cannot write ends the run with exit 2 at once) and opened for append only after every
// check that can refuse the run, so that a refused run leaves no empty file behind. Rows are written
// at the end, with the header first when the file was new or empty. Only regular files: a pipe
// (--csv /dev/stdout) would block the size check and take rows meant for a file.
class CsvFile {
 public:
  static void check(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
      if (!S_ISREG(st.st_mode))
        throw UsageError("--csv '" + escaped(path) + "' is not a regular file (a folder, a pipe or a device)");
      if (::access(path.c_str(), W_OK) != 0) throw UsageError("cannot write CSV file '" + escaped(path) + "'");
      return;
    }
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || ::access(dir.c_str(), W_OK) != 0)
      throw UsageError("cannot write CSV file '" + escaped(path) + "'");
  }
  explicit CsvFile(const std::string& path) : path_(path) {
    check(path);
    struct stat st {};
    fresh_ = ::stat(path.c_str(), &st) != 0 || st.st_size == 0;
    out_.open(path, std::ios::app);
    if (!out_) throw UsageError("cannot write CSV file '" + escaped(path) + "'");
  }
  void write(const std::string& lesson, const std::vector<Row>& rows, const Limits& l, const std::string& gpu) {
    if (fresh_) out_ << kCsvHeader << '\n';
    fresh_ = false;
    for (const auto& r : rows) out_ << csv_line(lesson, r, l, gpu) << '\n';
    out_.flush();
    if (!out_) throw std::runtime_error("writing CSV file '" + path_ + "' failed");
  }

 private:
  std::string path_;
  bool fresh_ = true;
  std::ofstream out_;
};

// The end of every run: the rows into the CSV (when one was asked for), with the measured copy as a
// row of its own (the figures draw it as the limit); exit code 1 when any step failed its check.
inline int finish_run(CsvFile* csv, const std::string& lesson, std::vector<Row> rows, const Limits& l,
                      const std::string& gpu) {
  bool failed = false;
  for (const auto& r : rows) failed |= !r.ok;
  if (csv) {
    rows.push_back(copy_row(l));
    csv->write(lesson, rows, l, gpu);
  }
  return failed ? 1 : 0;
}

template <class Launch, class Shape>
int ladder_main(const Lesson<Launch, Shape>& l, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      print_usage(l);
      return 0;
    }
  }
  Cli cli(argc, argv);
  Args args;
  const bool list = cli.flag("list");
  const auto step = cli.text("step");
  args.step = step;
  const int reps = static_cast<int>(cli.size("reps", 30, 100000));
  const auto csv_path = cli.text("csv");
  args.sweep = cli.flag("sweep");
  const bool check = !cli.flag("no-check");
  const bool profile = cli.flag("profile");
  args.dtype = cli.choice("dtype", l.dtypes[0], l.dtypes);
  for (const auto& o : l.options) {
    if (o.kind == Option::size) {
      if (auto v = cli.text(o.name)) args.sizes[o.name] = Cli::parse_size(std::string("--") + o.name, *v);
    } else if (o.kind == Option::text) {
      if (auto v = cli.text(o.name)) args.texts[o.name] = *v;
    } else if (cli.flag(o.name)) {
      args.flags[o.name] = true;
    }
    if (args.sweep && o.shape && args.given(o.name))
      throw UsageError(std::string("--sweep picks its own shapes: drop --") + o.name);
  }
  cli.finish();

  std::vector<int> chosen;
  if (step) chosen = find_steps(l.steps, *step);
  else
    for (int i = 0; i < static_cast<int>(l.steps.size()); ++i) chosen.push_back(i);
  const std::vector<Shape> shapes = l.shapes(args);  // validates the shape even for --list
  if (list) {
    print_steps(l.steps);
    return 0;
  }
  if (profile && csv_path) throw UsageError("--profile times nothing: drop --csv");
  if (csv_path) CsvFile::check(*csv_path);
  double most = 0, most_host = 0;
  for (const auto& sh : shapes) {
    most = std::max(most, l.device_bytes(sh, args));
    most_host = std::max(most_host, l.host_bytes ? l.host_bytes(sh, args) : l.device_bytes(sh, args));
  }
  ensure_host_fits(most_host, "this shape");

  const DeviceInfo dev = device_info();
  ensure_fits(most + 2.0 * dev.l2_bytes, "this shape");
  std::optional<CsvFile> csv;
  if (csv_path) csv.emplace(*csv_path);

  Limits limits;
  limits.copy_gbps = measure_copy_gbps();
  std::printf("lesson%s - %s\n", l.id, l.title);
  std::printf("device: %s, %d SMs, L2 %zu MiB, %zu KiB shared memory per block, sm_%d%d\n", dev.name.c_str(), dev.sms,
              dev.l2_bytes >> 20, dev.smem_per_block_optin >> 10, dev.cc_major, dev.cc_minor);
  std::printf("limit:  device-to-device copy %.0f GB/s (bytes read + written)\n", limits.copy_gbps);
  if (l.measure_limits) l.measure_limits(limits, dev);
  if (l.legend) std::printf("%s\n", l.legend(args).c_str());

  Timer timer(dev);
  timer.profile_only(profile);
  Context<Launch> cx{l.steps, chosen, args, dev, limits, timer, check, reps, l.slow_ms, l.warmup_ms, l.graph_below_ms};
  std::vector<Row> all;
  for (const auto& sh : shapes) {
    const std::vector<Row> rows = l.run(sh, cx);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return finish_run(csv ? &*csv : nullptr, l.id, all, cx.limits, dev.name);
}

// main() of every lesson: ladder_main with bad input, no GPU and CUDA errors turned into one line
// on stderr and exit codes 2, 77 and 1.
template <class Launch, class Shape>
int run_lesson(const Lesson<Launch, Shape>& l, int argc, char** argv) {
  const std::string prog = std::string("lesson") + l.id;
  return guarded_main(prog.c_str(), [&] { return ladder_main(l, argc, argv); });
}

}  // namespace kl
