// How an exercise is graded (exercises/NN_name/test.cu): an implementation passes when its check
// finds no wrong case and it runs at least kSpeedBar of the solution's speed, both timed in the same
// process on the same GPU at a size well above the L2 cache (a ratio, so the bar holds on any GPU).
// Each verdict is printed as one `grade ...` line for a person, sent to scripts/grade.py on the grading
// channel (common/grade_channel.hpp, which code under test cannot forge), and its timings are appended
// to $KL_GRADE_CSV when that is set (the teacher's page is drawn from that CSV). After the timed runs
// the graded kernel's output at the timed size is checked too, so that a kernel that does the work
// only on the checked sizes fails.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/grade_channel.hpp"
#include "common/timing.cuh"

namespace kl::grade {

inline constexpr double kSpeedBar = 0.8;

// Under compute-sanitizer (KL_SANITIZE set when the binary started: see grade_channel.hpp) the
// checks run on their small shapes and nothing is timed: the sanitizer slows kernels by orders of
// magnitude, and unevenly. grade.py never sets it, and a verdict without a speed is never a pass.
// A check's result: the first failing case, described with what was expected, or "" when all pass.
using Failure = std::string;

// A number as a failure message shows it: every digit a float has, and nan / inf spelled out.
inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

struct Speed {
  double ms = NAN, solution_ms = NAN;
  Failure at_timed_size;  // set by race(): the graded output at the timed size, checked after the runs
  double ratio() const { return solution_ms / ms; }  // 1 = as fast as the solution
  bool measured() const { return std::isfinite(ms) && std::isfinite(solution_ms); }
};

// Times two ways of enqueuing the same work on a stream: three rounds, the two alternating, 10
// repetitions each with a cold L2; each keeps its best median, so a passing disturbance of the GPU
// hurts neither side. Then `check_timed()` checks what the graded side computes at that size (it
// runs `mine` once more itself, into poisoned output). Skipped (not measured) under the sanitizer.
// With KL_GRADE_PROFILE=mine (or =solution), set by scripts/grade.py to explain a slow submission,
// race() runs that side once between cudaProfilerStart and cudaProfilerStop (for ncu
// --profile-from-start off) and times nothing: such a run's verdict has no speed and is not used.
template <class Mine, class Solution, class CheckTimed>
Speed race(Mine&& mine, Solution&& solution, CheckTimed&& check_timed) {
  Speed s;
  if (sanitized()) return s;
  Timer timer(device_info());
  if (const char* side = std::getenv("KL_GRADE_PROFILE")) {
    mine(timer.stream());  // module loading, first-touch, outside the profiled range
    solution(timer.stream());
    timer.profile_only(true);
    if (std::string(side) == "mine") timer.time(mine, TimingOptions{});
    if (std::string(side) == "solution") timer.time(solution, TimingOptions{});
    return s;
  }
  TimingOptions opt;
  opt.reps = 10;
  mine(timer.stream());  // untimed first runs: module loading, first-touch of the buffers
  solution(timer.stream());
  CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
  s.ms = s.solution_ms = INFINITY;
  for (int round = 0; round < 3; ++round) {
    s.ms = std::min(s.ms, timer.time(mine, opt).ms.median);
    s.solution_ms = std::min(s.solution_ms, timer.time(solution, opt).ms.median);
  }
  s.at_timed_size = check_timed();
  if (!s.at_timed_size.empty()) s.at_timed_size = "at the timed size, " + s.at_timed_size;
  return s;
}

// A check after a race: the graded side's output at the timed size against the solution's. Each
// runs once more into `out`, poisoned first (NaN for floats and halves, -1 for integers), and the
// two are compared element by element: equal, both NaN, or within rel * |solution's| + abs.
template <class T, class Mine, class Solution>
Failure same_as_solution(Mine&& mine, Solution&& solution, DeviceBuffer<T>& out, double rel, double abs) {
  const auto output = [&](auto&& run) {
    out.poison();
    run(nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    return out.download();
  };
  const std::vector<T> want = output(solution), got = output(mine);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<float>(got[i]), w = static_cast<float>(want[i]);
    const bool ok = std::isnan(g) || std::isnan(w) ? std::isnan(g) && std::isnan(w)
                                                   : g == w || std::fabs(g - w) <= rel * std::fabs(w) + abs;
    if (!ok)
      return "element " + std::to_string(i) + " of " + std::to_string(got.size()) + ": " + num(g) +
             ", the solution's " + num(w);
  }
  return {};
}

// What makes a wrong-technique variant fail: its result, or its speed.
enum class Fails { check, speed };

namespace detail {

inline const char* impl_name() {
#ifdef KL_SOLUTION_BUILD
  return "solution";
#else
  return "exercise";
#endif
}

// The check's failure, or else the failure at the timed size.
inline Failure first_failure(const Failure& failure, const Speed& speed) {
  return failure.empty() ? speed.at_timed_size : failure;
}

// One line on stdout and on the grading channel, without the line breaks a message may hold.
inline void say(std::string line) {
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::printf("grade %s\n", line.c_str());
  std::fflush(stdout);
  send(line);
}

// Two lines for scripts/grade.py ("ID IMPL check PASS|FAIL why", "ID IMPL speed RATIO MS SOLUTION_MS"
// or "... speed not measured"), and a CSV row: exercise,impl,check,ms,solution_ms,ratio,gpu.
inline void report(const std::string& id, const std::string& impl, const Failure& checked, const Speed& speed) {
  const Failure failure = first_failure(checked, speed);
  say(id + " " + impl + " check " + (failure.empty() ? "PASS" : "FAIL " + failure));
  char buf[96];
  if (speed.measured())
    std::snprintf(buf, sizeof buf, "speed %.3f %.4f %.4f", speed.ratio(), speed.ms, speed.solution_ms);
  else std::snprintf(buf, sizeof buf, "speed not measured%s", sanitized() ? " (under compute-sanitizer)" : "");
  say(id + " " + impl + " " + buf);
  const char* path = std::getenv("KL_GRADE_CSV");
  if (!path || (!speed.measured() && failure.empty())) return;  // a failed check is a row even untimed
  const bool fresh = !std::ifstream(path).good();
  std::ofstream csv(path, std::ios::app);
  if (fresh) csv << "exercise,impl,check,ms,solution_ms,ratio,gpu\n";
  csv << id << ',' << impl << ',' << (failure.empty() ? "pass" : "fail") << ',';
  if (speed.measured()) csv << speed.ms << ',' << speed.solution_ms << ',' << speed.ratio();
  else csv << ",,";
  csv << ',' << device_info().name << '\n';
}

}  // namespace detail

// The verdict on the exercise's own file (exercises/, a student's copy, or solutions/): right on
// every case of the check, and at least kSpeedBar of the solution's speed.
inline void verdict(const std::string& id, const Failure& checked, const Speed& speed) {
  detail::report(id, detail::impl_name(), checked, speed);
  const Failure failure = detail::first_failure(checked, speed);
  if (!failure.empty()) FAIL_CHECK("exercise " << id << ": " << failure);
  if (speed.measured())
    CHECK_MESSAGE(speed.ratio() >= kSpeedBar, "exercise " << id << ": " << speed.ratio()
                                                          << " of the solution's speed, below the bar of "
                                                          << kSpeedBar);
}

// An exercise this GPU cannot run (its code needs another architecture): not graded, never a pass.
inline void not_graded(const std::string& id, const std::string& why) {
  detail::say(id + " " + detail::impl_name() + " skip " + why);
  MESSAGE("exercise " << id << " not graded: " << why);
}

// The test of the test: a wrong technique kept beside the exercise must fail the way it should.
inline void wrong_variant(const std::string& id, const std::string& name, Fails expected, const Failure& checked,
                          const Speed& speed) {
  detail::report(id, "wrong:" + name, checked, speed);
  const Failure failure = detail::first_failure(checked, speed);
  if (expected == Fails::check) {
    CHECK_MESSAGE(!failure.empty(), "wrong variant " << name << " of exercise " << id << " passed the check");
  } else if (speed.measured()) {
    CHECK_MESSAGE(speed.ratio() < kSpeedBar, "wrong variant " << name << " of exercise " << id << " ran at "
                                                              << speed.ratio() << " of the solution's speed");
  }
}

}  // namespace kl::grade
