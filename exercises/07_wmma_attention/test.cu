// Grades exercise 07 (built twice: against exercises/ as exercise07_test, against solutions/ as
// solution07_test). Everything is in the "gpu" suite, which is what the exercise's ctest entry runs:
// step 2 built on softmax_two_rows_exercise, on 1 ... 1000 tiles and on scores scaled by 1e3, against
// the float64 reference of every row.
#include <doctest/doctest.h>

#include <vector>

#include <softmax_two_rows.cuh>  // exercises/ or solutions/, by include path
#include "common/random.hpp"
#include "lessons/07_wmma_attention/attention.cuh"

namespace {

void check_exercise(std::int64_t tiles, float scale_factor) {
  CAPTURE(tiles);
  CAPTURE(scale_factor);
  lesson07::Problem p = lesson07::tile_problem(tiles);
  p.scale *= scale_factor;
  const auto n = static_cast<std::size_t>(p.elements());
  std::vector<std::vector<float>> x(3);
  std::vector<kl::DeviceBuffer<__half>> dev;
  for (int i = 0; i < 3; ++i) {
    x[i] = kl::uniform_floats(n, -1.7320508, 1.7320508, kl::seed_for(7000 + tiles + i));
    std::vector<__half> h(n);
    for (std::size_t j = 0; j < n; ++j) {
      h[j] = __float2half_rn(x[i][j]);
      x[i][j] = __half2float(h[j]);
    }
    dev.emplace_back(h);
  }
  kl::DeviceBuffer<__half> o(n);
  o.poison();
  p.q = dev[0].data();
  p.k = dev[1].data();
  p.v = dev[2].data();
  p.o = o.data();
  tile_exercise<<<static_cast<unsigned>(tiles), 32>>>(p);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<double> ref = lesson07::reference(x[0], x[1], x[2], p);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(p.rows()));
  for (std::size_t r = 0; r < rows.size(); ++r) rows[r] = static_cast<std::int64_t>(r);
  CHECK(lesson07::max_error(o.download(), ref, rows, p.dim) <= lesson07::kRel);
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 07: one tile") { check_exercise(1, 1.f); }
  TEST_CASE("exercise 07: 1000 tiles") { check_exercise(1000, 1.f); }
  TEST_CASE("exercise 07: scores scaled by 1e3") { check_exercise(100, 1000.f); }
}
