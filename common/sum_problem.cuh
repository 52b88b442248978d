// The problem of the reduction lessons (01-03) as their kernels see it: the sum of n floats. Their steps
// share one launcher signature and the CUB baseline; each lesson's problem.cuh includes this file. What
// the executable adds (--n and the sweep, the float64 reference and its tolerance, the run for one n)
// is in common/sum_lesson.cuh.
#pragma once
#include <cub/device/device_reduce.cuh>

#include <cstddef>

#include "common/buffer.cuh"
#include "common/check.cuh"
#include "common/step.hpp"

namespace kl {

using Scratch = DeviceBuffer<unsigned char>;  // workspace of a step, grown by its launcher if needed
using SumLauncher = void (*)(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s);

// A step's launcher and the two properties the checks (common/sum_checks.hpp) hold it to.
struct SumKernel {
  SumLauncher fn;
  bool deterministic;  // same bits every run (no float atomics, whose order varies)
  // Adds all n elements into one float, one after another: its rounding error grows like n·ε, and
  // once the sum is 2^24 times a term, adding that term changes nothing (it is under half an ulp).
  bool one_accumulator = false;
  // Largest n it runs on (0: any). Above it the lesson runs the step on the first most_n values and
  // scales its time by n / most_n: one launch over all n would take seconds, long enough for a
  // display's watchdog to kill it. A sweep does not run it above most_n.
  std::size_t most_n = 0;
  // Every lesson calls its step the same way: st.launch(...), with the launcher's arguments.
  void operator()(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) const {
    fn(x, n, out, scratch, s);
  }
};
using SumStep = Step<SumKernel>;

// Whether a step runs on all n values (else on its first most_n).
inline bool runs_whole(const SumStep& st, std::size_t n) { return st.launch.most_n == 0 || n <= st.launch.most_n; }

// The library baseline of every reduction lesson. CUB asks for its temporary storage size first,
// then reduces (deterministically: fixed order, no atomics).
inline void launch_cub_sum(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  std::size_t bytes = 0;
  CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, x, out, static_cast<long long>(n), s));
  scratch.resize(bytes);  // allocates only the first time, which is the untimed check run
  CUDA_CHECK(cub::DeviceReduce::Sum(scratch.data(), bytes, x, out, static_cast<long long>(n), s));
}

}  // namespace kl
