// Grades exercises 03.1 and 03.2, built twice: exercise03_test grades the files of
// exercises/03_block_tree (or a student's copy), solution03_test the solutions and the wrong
// techniques kept beside them, which must fail. Both kernels write one partial sum per block, which
// the test adds up on the CPU (in double; the partials of whole numbers are exact, so their total is).
//   03.1 reduce_sequential: launched one thread per element, 256 a block; every block's partial must
//        equal, bit for bit, the sum in the order of a sequential-addressing tree (the interleaved
//        trees add in another order, so their last bits differ on real-valued data).
//   03.2 reduce_many_per_thread: launched with the grid its own file asks for
//        (grid_many_per_thread(n) blocks of 256): the partials must add up to the sum of x.
// Each is raced against its solution on 2^26 floats (256 MiB, well above any L2 cache), the kernel
// alone timed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "common/device.cuh"
#include "common/grade.cuh"
#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/03_block_tree/block_tree.cuh"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <many_per_thread.cuh>
#include <sequential.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/03_block_tree/many_per_thread.cuh"
#include "solutions/03_block_tree/sequential.cuh"
}  // namespace solution
#endif
namespace interleaved_divergent {
#include "solutions/03_block_tree/wrong/interleaved_divergent.cuh"
}
namespace first_add_on_load {
#include "solutions/03_block_tree/wrong/first_add_on_load.cuh"
}

namespace {

using kl::grade::num;
using TreeKernel = void (*)(const float*, std::size_t, float*);

constexpr unsigned kThreads = lesson03::kBlock;          // 256 threads a block, in both exercises
constexpr std::size_t kSmem = kThreads * sizeof(float);  // and one float of shared memory per thread
constexpr std::size_t kRaceN = std::size_t{1} << 26;     // 256 MiB

void enqueue(TreeKernel kernel, unsigned grid, const float* x, std::size_t n, float* partial, cudaStream_t s) {
  kernel<<<grid, kThreads, kSmem, s>>>(x, n, partial);
  CUDA_CHECK_LAUNCH();
}

std::vector<float> run_partials(TreeKernel kernel, unsigned grid, const std::vector<float>& host) {
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> partial(grid);
  partial.poison();  // a block that writes nothing leaves a NaN
  enqueue(kernel, grid, x.data(), host.size(), partial.data(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return partial.download();
}

double total(const std::vector<float>& partial) {
  double t = 0;
  for (float p : partial) t += p;
  return t;
}

// ---- 03.1: sequential addressing, bit for bit ---------------------------------------------------

unsigned one_per_thread_grid(std::size_t n) {
  return static_cast<unsigned>(std::max<std::size_t>(1, (n + kThreads - 1) / kThreads));
}

// The block sums of x as a sequential-addressing tree adds them, in float on the CPU.
std::vector<float> sequential_tree(const std::vector<float>& x) {
  std::vector<float> partial(one_per_thread_grid(x.size()));
  for (std::size_t b = 0; b < partial.size(); ++b) {
    float s[kThreads];
    for (unsigned t = 0; t < kThreads; ++t) s[t] = b * kThreads + t < x.size() ? x[b * kThreads + t] : 0.f;
    for (unsigned half = kThreads / 2; half > 0; half /= 2)
      for (unsigned t = 0; t < half; ++t) s[t] += s[t + half];
    partial[b] = s[0];
  }
  return partial;
}

// The same bits, or both NaN (a NaN's payload may differ between the CPU and the GPU).
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

kl::grade::Failure check_tree_order(TreeKernel kernel, const std::vector<float>& x, const std::string& at) {
  const auto got = run_partials(kernel, one_per_thread_grid(x.size()), x);
  const auto want = sequential_tree(x);
  for (std::size_t b = 0; b < want.size(); ++b)
    if (!same_bits(got[b], want[b]))
      return at + ": block " + std::to_string(b) + "'s partial " + num(got[b]) + ", expected " + num(want[b]) +
             " (the sum in sequential addressing's order, bit for bit)";
  return {};
}

// Whole numbers (every element counted: the total is exact in any order), then real numbers and a
// NaN, block by block against the sequential tree's bits.
kl::grade::Failure check_sequential(TreeKernel kernel) {
  for (std::size_t n : {1, 31, 33, 4097, 999983}) {
    const std::string at = "n = " + std::to_string(n);
    const auto whole = kl::integer_floats(n, -4, 4, kl::seed_for(n));
    const double want = kl::ref_sum(whole.data(), n).sum;
    const double got = total(run_partials(kernel, one_per_thread_grid(n), whole));
    if (got != want)
      return at + ", whole numbers: the block partials add up to " + num(got) + ", expected " + num(want);
    const auto failure = check_tree_order(kernel, whole, at + ", whole numbers");
    if (!failure.empty()) return failure;
  }
  for (std::size_t n : {4097, 999983}) {
    const auto real = kl::uniform_floats(n, -1, 1, kl::seed_for(n + 1));
    const auto failure = check_tree_order(kernel, real, "n = " + std::to_string(n) + ", values in [-1, 1]");
    if (!failure.empty()) return failure;
  }
  auto with_nan = kl::uniform_floats(4097, -1, 1, kl::seed_for(2));
  with_nan[300] = NAN;  // block 1's partial must be NaN, the others unchanged
  return check_tree_order(kernel, with_nan, "n = 4097, values in [-1, 1], element 300 NaN");
}

// Times `mine` against the solution on 2^26 floats, one thread per element as the check launches it,
// then checks its partials there.
kl::grade::Speed race_sequential(TreeKernel mine, TreeKernel solution) {
  if (kl::grade::sanitized()) return {};
  const std::vector<float> host = kl::uniform_floats(kRaceN, -1, 1, kl::seed_for(26));
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> partial(one_per_thread_grid(kRaceN));
  const auto with = [&](TreeKernel k) {
    return [&, k](cudaStream_t s) { enqueue(k, one_per_thread_grid(kRaceN), x.data(), kRaceN, partial.data(), s); };
  };
  return kl::grade::race(with(mine), with(solution), [&] {
    return check_tree_order(mine, host, "n = " + std::to_string(kRaceN) + ", values in [-1, 1]");
  });
}

// ---- 03.2: many elements per thread, the grid the exercise asks for -----------------------------

struct ManyPerThread {
  unsigned (*grid)(std::size_t);  // the exercise's grid_many_per_thread
  TreeKernel kernel;
};

// The sum of x as the kernel's partials give it, against the float64 reference: exactly (whole
// numbers: every partial is exact, so a missing element shows) or within the float tolerance.
kl::grade::Failure check_many_sum(ManyPerThread impl, const std::vector<float>& x, bool exact, const std::string& at) {
  const std::size_t n = x.size();
  const unsigned grid = impl.grid(n);
  if (grid == 0) return at + ": grid_many_per_thread returned 0 blocks, expected at least 1";
  const double got = total(run_partials(impl.kernel, grid, x));
  const kl::SumRef ref = kl::ref_sum(x.data(), n);
  const bool right = exact ? got == ref.sum || (std::isnan(got) && std::isnan(ref.sum))
                           : kl::sum_close(static_cast<float>(got), ref, n);
  if (!right) return at + " (" + std::to_string(grid) + " blocks): sum " + num(got) + ", expected " + num(ref.sum);
  return {};
}

// Whole numbers (exact in any order), real numbers (within the float tolerance), -inf as the first
// element and NaN as the last (999983 = 4 * 249995 + 3: the last three floats come after the float4s).
kl::grade::Failure check_many_per_thread(ManyPerThread impl) {
  std::vector<std::size_t> sizes = {1, 3, 31, 33, 4097, 999983};
  if (!kl::grade::sanitized()) sizes.push_back((std::size_t{1} << 24) + 1);
  for (std::size_t n : sizes) {
    const std::string at = "n = " + std::to_string(n);
    const auto whole = kl::integer_floats(n, -4, 4, kl::seed_for(n + 3));
    auto failure = check_many_sum(impl, whole, true, at + ", whole numbers");
    if (!failure.empty()) return failure;
    const auto real = kl::uniform_floats(n, -1, 1, kl::seed_for(n + 4));
    failure = check_many_sum(impl, real, false, at + ", values in [-1, 1]");
    if (!failure.empty()) return failure;
  }
  auto edges = kl::integer_floats(999983, -4, 4, kl::seed_for(5));
  edges.front() = -INFINITY;
  auto failure = check_many_sum(impl, edges, true, "n = 999983, whole numbers, the first element -inf");
  if (!failure.empty()) return failure;
  edges.back() = NAN;
  return check_many_sum(impl, edges, true, "n = 999983, whole numbers, the first element -inf, the last NaN");
}

// Times `mine` against the solution on 2^26 floats, each launched with its own grid, then checks the
// sum of its partials there: whole numbers, exactly (within the float tolerance of random reals at 2^26
// terms, partials of 0 would pass).
kl::grade::Speed race_many_per_thread(ManyPerThread mine, ManyPerThread solution) {
  if (kl::grade::sanitized()) return {};
  const std::vector<float> host = kl::integer_floats(kRaceN, -4, 4, kl::seed_for(26));
  const kl::DeviceBuffer<float> x(host);
  const unsigned mine_grid = mine.grid(kRaceN), solution_grid = solution.grid(kRaceN);
  kl::DeviceBuffer<float> partial(std::max(mine_grid, solution_grid));
  const auto with = [&](ManyPerThread impl, unsigned grid) {
    return [&, impl, grid](cudaStream_t s) { enqueue(impl.kernel, grid, x.data(), kRaceN, partial.data(), s); };
  };
  return kl::grade::race(with(mine, mine_grid), with(solution, solution_grid), [&] {
    return check_many_sum(mine, host, true, "n = " + std::to_string(kRaceN) + ", whole numbers");
  });
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 03.1: sequential addressing, in its order bit for bit") {
    kl::grade::verdict("03.1", check_sequential(graded::reduce_sequential),
                       race_sequential(graded::reduce_sequential, solution::reduce_sequential));
  }

  TEST_CASE("exercise 03.2: many elements per thread, a grid that fills the GPU once") {
    const ManyPerThread mine{graded::grid_many_per_thread, graded::reduce_many_per_thread};
    const ManyPerThread theirs{solution::grid_many_per_thread, solution::reduce_many_per_thread};
    kl::grade::verdict("03.2", check_many_per_thread(mine), race_many_per_thread(mine, theirs));
  }

  TEST_CASE("wrong 03.1: the interleaved divergent tree adds in another order") {
    kl::grade::wrong_variant("03.1", "interleaved_divergent", kl::grade::Fails::check,
                             check_sequential(interleaved_divergent::reduce_sequential),
                             race_sequential(interleaved_divergent::reduce_sequential, solution::reduce_sequential));
  }

  TEST_CASE("wrong 03.2: two elements per thread is too slow") {
    const ManyPerThread two{first_add_on_load::grid_many_per_thread, first_add_on_load::reduce_many_per_thread};
    const ManyPerThread theirs{solution::grid_many_per_thread, solution::reduce_many_per_thread};
    kl::grade::wrong_variant("03.2", "first_add_on_load", kl::grade::Fails::speed, check_many_per_thread(two),
                             race_many_per_thread(two, theirs));
  }
}
