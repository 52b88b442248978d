// Grades exercise 02 (built twice: against exercises/ as exercise02_test, against solutions/ as
// solution02_test). warp_reduce_sum must leave each warp's sum in lane 0: checked directly, warp by
// warp, and inside lesson 02's step 2 on whole numbers, whose float sums are exact in any order.
#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>

#include <warp_reduce_exercise.cuh>  // exercises/ or solutions/, by include path
#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/02_warp_shuffle/reduce.cuh"

namespace {

// Lesson 02's step 2 with the exercise's warp reduce: grid-stride partials, one atomic per warp.
__global__ void sum_with_exercise(const float* x, std::size_t n, float* out) {
  const float s = warp_reduce_sum(lesson02::grid_stride_partial(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

// One value per lane: lane 0 of each warp writes what warp_reduce_sum gave it.
__global__ void lane0_results(const float* x, float* warp_sums) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float s = warp_reduce_sum(x[i]);
  if (threadIdx.x % 32 == 0) warp_sums[i / 32] = s;
}

float run_sum(const std::vector<float>& host) {
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> out(1);
  out.poison();
  CUDA_CHECK(cudaMemset(out.data(), 0, sizeof(float)));
  sum_with_exercise<<<lesson02::blocks_for(host.size(), 1, kl::sm_count()), lesson02::kBlock>>>(x.data(), host.size(),
                                                                                                out.data());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(1)[0];
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 02: lane 0 of every warp holds the sum of its warp's 32 values") {
    const int warps = 64, block = 256;
    const auto host = kl::integer_floats(warps * 32, 1, 1000, kl::seed_for(21));  // a lost lane shows
    const kl::DeviceBuffer<float> x(host);
    kl::DeviceBuffer<float> warp_sums(warps);
    warp_sums.poison();
    lane0_results<<<warps * 32 / block, block>>>(x.data(), warp_sums.data());
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = warp_sums.download();
    for (int w = 0; w < warps; ++w) {
      CAPTURE(w);
      CHECK(got[w] == kl::ref_sum(host.data() + 32 * w, 32).sum);
    }
  }

  TEST_CASE("exercise 02: the sum of n floats with one atomic per warp") {
    std::vector<std::size_t> sizes = {31, 32, 33, 4097, 70001};
    if (!std::getenv("KL_SANITIZE")) sizes.insert(sizes.end(), {999983, std::size_t{1} << 24});  // slow if sanitized
    for (std::size_t n : sizes) {
      CAPTURE(n);
      const auto whole = kl::integer_floats(n, -4, 4, kl::seed_for(n + 22));
      CHECK(run_sum(whole) == kl::ref_sum(whole.data(), n).sum);  // exact: whole numbers
    }
  }
}
