// Grades exercise 01 (built twice: against exercises/ as exercise01_test, against solutions/ as
// solution01_test). The kernel must sum every element, whatever the grid, exactly on whole numbers.
#include <doctest/doctest.h>

#include <reduce_exercise.cuh>  // exercises/ or solutions/, by include path
#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/01_naive_reduction/reduce.cuh"

namespace {
float run_exercise(const std::vector<float>& host) {
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> out(1);
  out.poison();
  CUDA_CHECK(cudaMemset(out.data(), 0, sizeof(float)));
  sum_grid_stride_exercise<<<lesson01::fill_grid(host.size()), lesson01::kBlock>>>(x.data(), host.size(), out.data());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(1)[0];
}
}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 01: the grid-stride sum covers every element") {
    for (std::size_t n :
         {std::size_t{1}, std::size_t{33}, std::size_t{4097}, std::size_t{999983}, std::size_t{1} << 24}) {
      CAPTURE(n);
      const auto whole = kl::integer_floats(n, -4, 4, kl::seed_for(n));
      CHECK(run_exercise(whole) == kl::ref_sum(whole.data(), n).sum);  // exact: whole numbers
      const auto real = kl::uniform_floats(n, -1, 1, kl::seed_for(n + 1));
      CHECK(kl::sum_close(run_exercise(real), kl::ref_sum(real.data(), n), n));
    }
  }
}
