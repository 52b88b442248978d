// How an exercise is graded (exercises/NN_name/test.cu): an implementation passes when its check
// finds no wrong case and it runs at least kSpeedBar of the solution's speed, both timed in the same
// process on the same GPU at a size well above the L2 cache (a ratio, so the bar holds on any GPU).
// Each verdict is printed as one `grade ...` line, which scripts/grade.py reads, and its timings are
// appended to $KL_GRADE_CSV when that is set (the teacher's page is drawn from that CSV).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/device.cuh"
#include "common/timing.cuh"

namespace kl::grade {

inline constexpr double kSpeedBar = 0.8;

// Under compute-sanitizer (KL_SANITIZE set) the checks run on their small shapes and nothing is
// timed: the sanitizer slows kernels by orders of magnitude, and unevenly.
inline bool sanitized() { return std::getenv("KL_SANITIZE") != nullptr; }

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
  double ratio() const { return solution_ms / ms; }  // 1 = as fast as the solution
  bool measured() const { return std::isfinite(ms) && std::isfinite(solution_ms); }
};

// Times two ways of enqueuing the same work on a stream: three rounds, the two alternating, 10
// repetitions each with a cold L2; each keeps its best median, so a passing disturbance of the GPU
// hurts neither side. Skipped (not measured) under the sanitizer.
template <class Mine, class Solution>
Speed race(Mine&& mine, Solution&& solution) {
  Speed s;
  if (sanitized()) return s;
  Timer timer(device_info());
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
  return s;
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

// One line for scripts/grade.py, and a CSV row: exercise,impl,check,ms,solution_ms,ratio,gpu.
inline void report(const std::string& id, const std::string& impl, const Failure& failure, const Speed& speed) {
  std::printf("grade %s %s check %s%s\n", id.c_str(), impl.c_str(), failure.empty() ? "PASS" : "FAIL ",
              failure.c_str());
  if (speed.measured())
    std::printf("grade %s %s speed %.3f %.4f %.4f\n", id.c_str(), impl.c_str(), speed.ratio(), speed.ms,
                speed.solution_ms);
  else
    std::printf("grade %s %s speed not measured%s\n", id.c_str(), impl.c_str(),
                sanitized() ? " (under compute-sanitizer)" : "");
  std::fflush(stdout);
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
inline void verdict(const std::string& id, const Failure& failure, const Speed& speed) {
  detail::report(id, detail::impl_name(), failure, speed);
  if (!failure.empty()) FAIL_CHECK("exercise " << id << ": " << failure);
  if (speed.measured())
    CHECK_MESSAGE(speed.ratio() >= kSpeedBar, "exercise " << id << ": " << speed.ratio()
                                                          << " of the solution's speed, below the bar of "
                                                          << kSpeedBar);
}

// An exercise this GPU cannot run (its code needs another architecture): not graded, never a pass.
inline void not_graded(const std::string& id, const std::string& why) {
  std::printf("grade %s %s skip %s\n", id.c_str(), detail::impl_name(), why.c_str());
  std::fflush(stdout);
  MESSAGE("exercise " << id << " not graded: " << why);
}

// The test of the test: a wrong technique kept beside the exercise must fail the way it should.
inline void wrong_variant(const std::string& id, const std::string& name, Fails expected, const Failure& failure,
                          const Speed& speed) {
  detail::report(id, "wrong:" + name, failure, speed);
  if (expected == Fails::check) {
    CHECK_MESSAGE(!failure.empty(), "wrong variant " << name << " of exercise " << id << " passed the check");
  } else if (speed.measured()) {
    CHECK_MESSAGE(speed.ratio() < kSpeedBar, "wrong variant " << name << " of exercise " << id << " ran at "
                                                              << speed.ratio() << " of the solution's speed");
  }
}

}  // namespace kl::grade
