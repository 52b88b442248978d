// Grades exercises 04.1 and 04.2, built twice: exercise04_test grades the files of
// exercises/04_online_softmax (or a student's copy), solution04_test the solutions and the wrong
// techniques kept beside them, which must fail.
//   04.1 online_combine, the (max, sum) rule of step 5: on the host (a CPU part: cases with known
//        answers), then in the given warp-per-row online softmax, checked against the float64
//        reference on rows of 1 to 50257 floats and -inf, raced on 16384 x 4096 floats (256 MiB).
//   04.2 softmax_warp_per_row, step 2 for short rows: checked on rows of 1 to 1000 floats with -inf,
//        NaN, rows of only -inf and large magnitudes, raced on 2097152 x 32 floats (256 MiB).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/block.cuh"
#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/grade.cuh"
#include "common/random.hpp"
#include "common/softmax_math.cuh"
#include "common/warp.cuh"
#include "lessons/04_online_softmax/host.cuh"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <online_combine.cuh>
#include <warp_per_row.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/04_online_softmax/online_combine.cuh"
#include "solutions/04_online_softmax/warp_per_row.cuh"
}  // namespace solution
#endif
namespace no_inf_guard {
#include "solutions/04_online_softmax/wrong/no_inf_guard.cuh"
}
namespace block_per_row {
#include "solutions/04_online_softmax/wrong/block_per_row.cuh"
}
namespace one_column_per_lane {
#include "solutions/04_online_softmax/wrong/one_column_per_lane.cuh"
}

namespace {

using kl::grade::num;
using SoftmaxKernel = void (*)(const float*, float*, std::int64_t, int);

// 04.1's kernel is written for one row per warp and a grid that covers the rows: 8 rows per block.
void enqueue_online(SoftmaxKernel kernel, const float* x, float* y, std::int64_t rows, int cols, cudaStream_t s) {
  constexpr int kRowsPerBlock = 8;
  kernel<<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), 32 * kRowsPerBlock, 0, s>>>(x, y, rows,
                                                                                                          cols);
  CUDA_CHECK_LAUNCH();
}

// 04.2's kernels walk the rows in steps of the grid: blocks of 128 threads, 16 per SM (a full H100
// SM), whatever the number of rows.
void enqueue_per_row(SoftmaxKernel kernel, const float* x, float* y, std::int64_t rows, int cols, cudaStream_t s) {
  kernel<<<static_cast<unsigned>(16 * kl::sm_count()), 128, 0, s>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

using Enqueue = void (*)(SoftmaxKernel, const float*, float*, std::int64_t, int, cudaStream_t);

// Runs one kernel on x, the output poisoned with a finite value (0x3C3C3C3C = 0.0115): a row whose
// answer is NaN must be written as NaN, and an element left unwritten shows.
std::vector<float> run(Enqueue enqueue, SoftmaxKernel kernel, const std::vector<float>& x, std::int64_t rows,
                       int cols) {
  const kl::DeviceBuffer<float> dx(x);
  kl::DeviceBuffer<float> dy(x.size());
  dy.poison(0x3C);
  enqueue(kernel, dx.data(), dy.data(), rows, cols, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return dy.download();
}

// The first element off the float64 reference (beyond lesson 04's f32 tolerance, or NaN where the
// reference is not, or the other way round), as one line; "" when every element is right.
kl::grade::Failure compare(const std::string& what, const std::vector<float>& x, const std::vector<float>& y,
                           std::int64_t rows, int cols) {
  const std::vector<double> ref = lesson04::ref_softmax(x, rows, cols);
  const lesson04::Tolerance tol = lesson04::tolerance(lesson04::Dtype::f32);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const double got = y[r * cols + c], want = ref[r * cols + c];
      const bool ok = std::isnan(want) || std::isnan(got)
                          ? std::isnan(want) && std::isnan(got)
                          : std::fabs(got - want) <= tol.rel * (std::fabs(want) + tol.abs / tol.rel);
      if (!ok)
        return what + ", rows = " + std::to_string(rows) + ", cols = " + std::to_string(cols) + ", row " +
               std::to_string(r) + ", column " + std::to_string(c) + ": y = " + num(got) + ", expected " + num(want) +
               " (relative error at most " + num(tol.rel) + ")";
    }
  }
  return {};
}

// After a race at the timed size: `mine` must write what the solution writes there (within the f32
// tolerance). Both run again, into poisoned output.
kl::grade::Failure check_timed(Enqueue enqueue, SoftmaxKernel mine, SoftmaxKernel solution, const float* x,
                               kl::DeviceBuffer<float>& y, std::int64_t rows, int cols) {
  const auto output = [&](SoftmaxKernel k) {
    y.poison(0x3C);
    enqueue(k, x, y.data(), rows, cols, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    return y.download();
  };
  const std::vector<float> want = output(solution), got = output(mine);
  const lesson04::Tolerance tol = lesson04::tolerance(lesson04::Dtype::f32);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isnan(want[i]) || std::isnan(got[i])
                        ? std::isnan(want[i]) && std::isnan(got[i])
                        : std::fabs(got[i] - want[i]) <= tol.rel * (std::fabs(want[i]) + tol.abs / tol.rel);
    if (!ok)
      return "rows = " + std::to_string(rows) + ", cols = " + std::to_string(cols) + ", row " +
             std::to_string(i / cols) + ", column " + std::to_string(i % cols) + ": y = " + num(got[i]) +
             ", the solution's " + num(want[i]);
  }
  return {};
}

kl::grade::Failure check_one(Enqueue enqueue, SoftmaxKernel kernel, const std::string& what,
                             const std::vector<float>& x, std::int64_t rows, int cols) {
  return compare(what, x, run(enqueue, kernel, x, rows, cols), rows, cols);
}

// Random rows of each length: normal values, values around +-1e4 (the max grows often, and a
// running max that starts at 0 instead of -inf shows), rising rows (a new max at every element),
// and values spread over +-1e30 (one element takes all the mass). Fewer rows under the sanitizer.
kl::grade::Failure check_lengths(Enqueue enqueue, SoftmaxKernel kernel, const std::vector<int>& lengths) {
  for (int cols : lengths) {
    const std::int64_t rows = cols < 1000 ? (kl::grade::sanitized() ? 40 : 300) : 5;
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto seed = static_cast<std::uint64_t>(cols) * 16;
    kl::grade::Failure f =
        check_one(enqueue, kernel, "normal(0, 3)", kl::normal_floats(n, 0, 3, kl::seed_for(seed)), rows, cols);
    if (f.empty())
      f = check_one(enqueue, kernel, "normal(1e4, 2)", kl::normal_floats(n, 1e4, 2, kl::seed_for(seed + 1)), rows,
                    cols);
    if (f.empty())
      f = check_one(enqueue, kernel, "normal(-1e4, 2)", kl::normal_floats(n, -1e4, 2, kl::seed_for(seed + 2)), rows,
                    cols);
    if (f.empty()) {
      auto rising = kl::normal_floats(n, 0, 1, kl::seed_for(seed + 3));
      for (std::size_t i = 0; i < n; ++i) rising[i] += static_cast<float>(i % cols) * 0.01f;
      f = check_one(enqueue, kernel, "rising rows", rising, rows, cols);
    }
    if (f.empty())
      f = check_one(enqueue, kernel, "normal(0, 1e29)", kl::normal_floats(n, 0, 1e29, kl::seed_for(seed + 4)), rows,
                    cols);
    if (!f.empty()) return f;
  }
  return {};
}

// Special values on rows of length `cols`: row 0 with every third element -inf (they give 0), row 1
// with -inf everywhere but its last element, row 2 only -inf (NaN), row 3 with a NaN (NaN), row 4
// with +inf (NaN), rows 5 to 7 normal.
kl::grade::Failure check_special(Enqueue enqueue, SoftmaxKernel kernel, int cols) {
  const std::int64_t rows = 8;
  auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(7 + cols));
  for (int c = 0; c < cols; c += 3) x[c] = -INFINITY;
  for (int c = 0; c + 1 < cols; ++c) x[1 * cols + c] = -INFINITY;
  for (int c = 0; c < cols; ++c) x[2 * cols + c] = -INFINITY;
  x[3 * cols + cols / 2] = NAN;
  x[4 * cols + cols / 3] = INFINITY;
  return check_one(enqueue, kernel, "-inf, NaN and +inf", x, rows, cols);
}

// ---- 04.1: the combine, on the host and in the warp-per-row online softmax ----------------------

kl::grade::Failure check_online(SoftmaxKernel kernel) {
  const std::vector<int> lengths = kl::grade::sanitized() ? std::vector<int>{1, 7, 33, 1000, 4097}
                                                          : std::vector<int>{1, 7, 31, 32, 33, 100, 1000, 4097, 50257};
  kl::grade::Failure f = check_lengths(enqueue_online, kernel, lengths);
  for (int cols : {5, 45, 1000})
    if (f.empty()) f = check_special(enqueue_online, kernel, cols);
  return f;
}

// Times `mine` against the solution on 16384 rows of 4096 floats (256 MiB in, 256 MiB out), then
// checks its rows there.
kl::grade::Speed race_online(SoftmaxKernel mine, SoftmaxKernel solution) {
  if (kl::grade::sanitized()) return {};
  const std::int64_t rows = 16384;
  const int cols = 4096;
  const kl::DeviceBuffer<float> x(kl::normal_floats(rows * cols, 0, 2, kl::seed_for(41)));
  kl::DeviceBuffer<float> y(rows * cols);
  const auto with = [&](SoftmaxKernel k) {
    return [&, k](cudaStream_t s) { enqueue_online(k, x.data(), y.data(), rows, cols, s); };
  };
  return kl::grade::race(with(mine), with(solution),
                         [&] { return check_timed(enqueue_online, mine, solution, x.data(), y, rows, cols); });
}

// ---- 04.2: a warp per short row ------------------------------------------------------------------

kl::grade::Failure check_per_row(SoftmaxKernel kernel) {
  const std::vector<int> lengths =
      kl::grade::sanitized() ? std::vector<int>{1, 7, 33, 100} : std::vector<int>{1, 7, 31, 32, 33, 100, 1000};
  kl::grade::Failure f = check_lengths(enqueue_per_row, kernel, lengths);
  for (int cols : {1, 7, 32, 33, 100})
    if (f.empty()) f = check_special(enqueue_per_row, kernel, cols);
  return f;
}

// Times `mine` against the solution on 2^21 rows of 32 floats (256 MiB in, 256 MiB out), then checks
// its rows there.
kl::grade::Speed race_per_row(SoftmaxKernel mine, SoftmaxKernel solution) {
  if (kl::grade::sanitized()) return {};
  const std::int64_t rows = std::int64_t{1} << 21;
  const int cols = 32;
  const kl::DeviceBuffer<float> x(kl::normal_floats(rows * cols, 0, 2, kl::seed_for(42)));
  kl::DeviceBuffer<float> y(rows * cols);
  const auto with = [&](SoftmaxKernel k) {
    return [&, k](cudaStream_t s) { enqueue_per_row(k, x.data(), y.data(), rows, cols, s); };
  };
  return kl::grade::race(with(mine), with(solution),
                         [&] { return check_timed(enqueue_per_row, mine, solution, x.data(), y, rows, cols); });
}

}  // namespace

// The combine alone, on the host: cases whose answers are known exactly or nearly.
TEST_CASE("exercise 04.1 [cpu]: online_combine merges two parts into the (max, sum) of their union") {
  // {1, 2} is (2, 1 + e^-1) and {5} is (5, 1): together (5, e^-4 + e^-3 + 1), in either order
  const kl::MaxSum got = graded::online_combine({2.f, 1.f + std::exp(-1.f)}, {5.f, 1.f});
  CHECK(got.m == 5.f);
  CHECK(got.s == doctest::Approx(std::exp(-4.0) + std::exp(-3.0) + 1.0).epsilon(1e-6));
  const kl::MaxSum swapped = graded::online_combine({5.f, 1.f}, {2.f, 1.f + std::exp(-1.f)});
  CHECK(swapped.m == 5.f);
  CHECK(swapped.s == doctest::Approx(got.s).epsilon(1e-6));
  // equal maxima: the sums just add
  CHECK(graded::online_combine({3.f, 2.f}, {3.f, 1.5f}).s == doctest::Approx(3.5).epsilon(1e-6));
  // nothing seen, or only -inf: no mass, and no NaN
  const kl::MaxSum empty = graded::online_combine({-INFINITY, 0.f}, {-INFINITY, 0.f});
  CHECK(empty.m == -INFINITY);
  CHECK(empty.s == 0.f);
  const kl::MaxSum masked = graded::online_combine({-INFINITY, 0.f}, {-INFINITY, 1.f});
  CHECK(masked.m == -INFINITY);
  CHECK(masked.s == 0.f);
  const kl::MaxSum after_masked = graded::online_combine({-INFINITY, 1.f}, {3.f, 1.f});
  CHECK(after_masked.m == 3.f);
  CHECK(after_masked.s == doctest::Approx(1.0).epsilon(1e-6));
  // a NaN in either part stays
  CHECK(std::isnan(graded::online_combine({1.f, 1.f}, {NAN, 1.f}).m));
  CHECK(std::isnan(graded::online_combine({NAN, 1.f}, {1.f, 1.f}).s));
}

TEST_SUITE("gpu") {
  TEST_CASE("exercise 04.1: the online softmax built on online_combine") {
    kl::grade::verdict("04.1", check_online(graded::softmax_online),
                       race_online(graded::softmax_online, solution::softmax_online));
  }

  TEST_CASE("exercise 04.2: a warp per short row") {
    kl::grade::verdict("04.2", check_per_row(graded::softmax_warp_per_row),
                       race_per_row(graded::softmax_warp_per_row, solution::softmax_warp_per_row));
  }

  TEST_CASE("wrong 04.1: rescaling a part whose max is -inf makes NaN") {
    kl::grade::wrong_variant("04.1", "no_inf_guard", kl::grade::Fails::check,
                             check_online(no_inf_guard::softmax_online),
                             race_online(no_inf_guard::softmax_online, solution::softmax_online));
  }

  TEST_CASE("wrong 04.2: a block per row is too slow on short rows") {
    kl::grade::wrong_variant("04.2", "block_per_row", kl::grade::Fails::speed,
                             check_per_row(block_per_row::softmax_warp_per_row),
                             race_per_row(block_per_row::softmax_warp_per_row, solution::softmax_warp_per_row));
  }

  TEST_CASE("wrong 04.2: one column per lane misses the rest of a row longer than 32") {
    kl::grade::wrong_variant("04.2", "one_column_per_lane", kl::grade::Fails::check,
                             check_per_row(one_column_per_lane::softmax_warp_per_row),
                             race_per_row(one_column_per_lane::softmax_warp_per_row, solution::softmax_warp_per_row));
  }
}
