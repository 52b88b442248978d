// Grades exercises 01.1 and 01.2, built twice: exercise01_test grades the files of
// exercises/01_naive_reduction (or a student's copy), solution01_test the solutions and the wrong
// techniques kept beside them, which must fail. A sum kernel passes when it is right on every size
// below, whatever part of the array the grid covers, and runs at least 80 % of the solution's speed
// on 2^26 floats (256 MiB, well above any L2 cache).
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/grade.cuh"
#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/01_naive_reduction/reduce.cuh"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <block_atomic.cuh>
#include <grid_stride.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/01_naive_reduction/block_atomic.cuh"
#include "solutions/01_naive_reduction/grid_stride.cuh"
}  // namespace solution
#endif
namespace atomic_in_loop {
#include "solutions/01_naive_reduction/wrong/atomic_in_loop.cuh"
}
namespace atomic_per_thread {
#include "solutions/01_naive_reduction/wrong/atomic_per_thread.cuh"
}

namespace {

using SumKernel = void (*)(const float*, std::size_t, float*);

// Both exercises are launched as steps 3 and 4 are: a grid that fills the GPU once, 256 threads a block.
void enqueue_sum(SumKernel kernel, const float* x, std::size_t n, float* out, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));
  kernel<<<lesson01::fill_grid(n), lesson01::kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

float run_sum(SumKernel kernel, const std::vector<float>& host) {
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> out(1);
  out.poison();
  enqueue_sum(kernel, x.data(), host.size(), out.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(1)[0];
}

// Whole numbers (exact in any order), real numbers (within the float tolerance), and a NaN as the
// very last element, which only a kernel that adds every element passes on.
kl::grade::Failure check_sum(SumKernel kernel) {
  std::vector<std::size_t> sizes = {1, 31, 33, 4097, 999983};
  if (!kl::grade::sanitized()) sizes.push_back(std::size_t{1} << 24);
  for (std::size_t n : sizes) {
    const std::string at = "n = " + std::to_string(n);
    const auto whole = kl::integer_floats(n, -4, 4, kl::seed_for(n));
    const double want = kl::ref_sum(whole.data(), n).sum;
    const float got = run_sum(kernel, whole);
    if (got != want) return at + ", whole numbers: sum " + kl::grade::num(got) + ", expected " + kl::grade::num(want);
    const auto real = kl::uniform_floats(n, -1, 1, kl::seed_for(n + 1));
    const kl::SumRef ref = kl::ref_sum(real.data(), n);
    const float got_real = run_sum(kernel, real);
    if (!kl::sum_close(got_real, ref, n))
      return at + ", values in [-1, 1]: sum " + kl::grade::num(got_real) + ", expected " + kl::grade::num(ref.sum);
  }
  auto last_nan = kl::integer_floats(999983, -4, 4, kl::seed_for(3));
  last_nan.back() = NAN;
  const float got = run_sum(kernel, last_nan);
  if (got == got) return "n = 999983, the last element NaN: sum " + kl::grade::num(got) + ", expected nan";
  return {};
}

// Times `mine` against the solution on 2^26 floats, then checks the sum `mine` gives there. Whole numbers
// in [-4, 4]: every partial sum is an exact float, so the sum must be exact; with random reals the float
// tolerance at 2^26 terms would pass a kernel that skipped the work and returned 0.
kl::grade::Speed race_sum(SumKernel mine, SumKernel solution) {
  if (kl::grade::sanitized()) return {};
  const std::size_t n = std::size_t{1} << 26;
  const std::vector<float> host = kl::integer_floats(n, -4, 4, kl::seed_for(26));
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> out(1);
  const auto with = [&](SumKernel k) { return [&, k](cudaStream_t s) { enqueue_sum(k, x.data(), n, out.data(), s); }; };
  const auto check_timed = [&]() -> kl::grade::Failure {
    const float got = run_sum(mine, host);
    const double want = kl::ref_sum(host.data(), n).sum;
    if (got == want) return {};
    return "n = " + std::to_string(n) + ", whole numbers: sum " + kl::grade::num(got) + ", expected " +
           kl::grade::num(want);
  };
  return kl::grade::race(with(mine), with(solution), check_timed);
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 01.1: a grid-stride loop, one atomic per thread") {
    kl::grade::verdict("01.1", check_sum(graded::sum_grid_stride),
                       race_sum(graded::sum_grid_stride, solution::sum_grid_stride));
  }

  TEST_CASE("exercise 01.2: a shared-memory tree, one atomic per block") {
    kl::grade::verdict("01.2", check_sum(graded::sum_block_atomic),
                       race_sum(graded::sum_block_atomic, solution::sum_block_atomic));
  }

  TEST_CASE("wrong 01.1: an atomic per element inside the grid-stride loop is too slow") {
    kl::grade::wrong_variant("01.1", "atomic_in_loop", kl::grade::Fails::speed,
                             check_sum(atomic_in_loop::sum_grid_stride),
                             race_sum(atomic_in_loop::sum_grid_stride, solution::sum_grid_stride));
  }

  TEST_CASE("wrong 01.2: one atomic per thread is too slow") {
    kl::grade::wrong_variant("01.2", "atomic_per_thread", kl::grade::Fails::speed,
                             check_sum(atomic_per_thread::sum_block_atomic),
                             race_sum(atomic_per_thread::sum_block_atomic, solution::sum_block_atomic));
  }
}
