// Grades exercise 04 (built twice: against exercises/ as exercise04_test, against solutions/ as
// solution04_test). Everything is in the "gpu" suite, which is what the exercise's ctest entry runs:
// the combine itself on the host, then the warp-per-row online softmax built on it.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <online_combine.cuh>  // exercises/ or solutions/, by include path
#include "common/buffer.cuh"
#include "common/random.hpp"
#include "lessons/04_online_softmax/problem.cuh"

namespace {

std::vector<float> run_exercise(const std::vector<float>& x, std::int64_t rows, int cols) {
  const kl::DeviceBuffer<float> dx(x);
  kl::DeviceBuffer<float> dy(x.size());
  dy.poison(0x3C);  // finite: a row that should be NaN must be written as NaN
  const int warps_per_block = 8;
  const auto grid = static_cast<unsigned>((rows + warps_per_block - 1) / warps_per_block);
  softmax_online_exercise<<<grid, 32 * warps_per_block>>>(dx.data(), dy.data(), rows, cols);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  return dy.download();
}

void check_against_reference(const std::vector<float>& x, std::int64_t rows, int cols) {
  CAPTURE(rows);
  CAPTURE(cols);
  const lesson04::Tolerance tol = lesson04::tolerance(lesson04::Dtype::f32);
  CHECK(lesson04::max_error(run_exercise(x, rows, cols), lesson04::ref_softmax(x, rows, cols), tol) <= tol.rel);
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 04: combine merges two parts into the (max, sum) of their union") {
    // {1, 2} -> (2, 1 + e^-1);  {5} -> (5, 1);  together (5, e^-4 + e^-3 + 1)
    const kl::MaxSum got = combine_exercise({2.f, 1.f + std::exp(-1.f)}, {5.f, 1.f});
    CHECK(got.m == 5.f);
    CHECK(got.s == doctest::Approx(std::exp(-4.0) + std::exp(-3.0) + 1.0).epsilon(1e-6));
    const kl::MaxSum swapped = combine_exercise({5.f, 1.f}, {2.f, 1.f + std::exp(-1.f)});
    CHECK(swapped.s == doctest::Approx(got.s).epsilon(1e-6));
    const kl::MaxSum empty = combine_exercise({-INFINITY, 0.f}, {-INFINITY, 0.f});
    CHECK(empty.m == -INFINITY);
    CHECK(empty.s == 0.f);
    CHECK(std::isnan(combine_exercise({1.f, 1.f}, {NAN, 1.f}).s));
  }

  TEST_CASE("exercise 04: the online softmax matches the float64 reference") {
    for (int cols : {1, 7, 31, 32, 33, 100, 1000, 4097, 50257}) {
      const std::int64_t rows = cols < 1000 ? 300 : 5;
      check_against_reference(kl::normal_floats(rows * cols, 0, 3, kl::seed_for(cols)), rows, cols);
      auto shifted = kl::normal_floats(rows * cols, 1e4, 2, kl::seed_for(cols + 1));  // the max grows often
      check_against_reference(shifted, rows, cols);
      auto increasing = kl::normal_floats(rows * cols, 0, 1, kl::seed_for(cols + 2));
      for (std::int64_t i = 0; i < rows * cols; ++i) increasing[i] += static_cast<float>(i % cols) * 0.01f;
      check_against_reference(increasing, rows, cols);
    }
  }

  TEST_CASE("exercise 04: -inf entries give 0, a row of only -inf is NaN, lanes past a short row add nothing") {
    const int cols = 45;
    const std::int64_t rows = 4;
    auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(7));
    for (int c = 0; c < cols; c += 3) x[c] = -INFINITY;
    for (int c = 0; c < cols; ++c) x[2 * cols + c] = -INFINITY;
    const auto y = run_exercise(x, rows, cols);
    for (int c = 0; c < cols; c += 3) CHECK(y[c] == 0.f);
    for (int c = 0; c < cols; ++c) CHECK(std::isnan(y[2 * cols + c]));
    const lesson04::Tolerance tol = lesson04::tolerance(lesson04::Dtype::f32);
    CHECK(lesson04::max_error(y, lesson04::ref_softmax(x, rows, cols), tol) <= tol.rel);
    check_against_reference(kl::normal_floats(64 * 5, 0, 2, kl::seed_for(8)), 64, 5);  // 27 lanes see nothing
  }
}
