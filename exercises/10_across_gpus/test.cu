// Grades exercise 10.1, built twice: exercise10_test grades the file of exercises/10_across_gpus (or a
// student's copy), solution10_test the solution and the wrong technique kept beside it, which must fail.
//   10.1 RingSchedule: which chunk each GPU sends at step t of the ring, and its role. Played on paper
//        for G = 2 .. 8 (the [cpu] case, graded without a GPU), then used by step 4's kernel on every
//        visible GPU (2 or more) on awkward sizes, and raced against the solution on 2^26 floats a GPU.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/grade.cuh"
#include "common/random.hpp"
#include "lessons/10_across_gpus/host.cuh"
#include "lessons/10_across_gpus/ring_check.hpp"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <ring_schedule.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/10_across_gpus/ring_schedule.cuh"
}  // namespace solution
#endif
namespace wrong_direction {
#include "solutions/10_across_gpus/wrong/wrong_direction.cuh"
}

namespace {

int group_size() {
  const int visible = lesson10::visible_gpus();
  return visible < lesson10::kMaxGpus ? visible : lesson10::kMaxGpus;
}

// The ring on paper for every G, the first fault in words.
template <class S>
kl::grade::Failure on_paper() {
  for (int gpus = 2; gpus <= lesson10::kMaxGpus; ++gpus) {
    const std::string f = lesson10::simulate_ring<S>(gpus);
    if (!f.empty()) return "the ring on paper: " + f;
  }
  return {};
}

// Step 4's kernel with schedule S on `gpus` GPUs and n floats each: every GPU's output against the float64
// sum, and the same bits on every GPU.
template <class S>
kl::grade::Failure on_gpus(int gpus, std::size_t n) {
  const std::string at = std::to_string(gpus) + " GPUs, n = " + std::to_string(n);
  lesson10::GroupOwner owner(gpus, n);
  lesson10::Group& g = owner.g;
  std::vector<std::vector<float>> inputs;
  for (int h = 0; h < gpus; ++h) inputs.push_back(lesson10::input_of(n, h, kl::seed_for(n + 101)));
  if (n > 7) inputs[gpus - 1][7] = NAN;
  const lesson10::Reference ref = lesson10::upload_inputs(g, inputs);
  for (int h = 0; h < gpus; ++h) {
    lesson10::OnGpu on(h);
    CUDA_CHECK(cudaMemset(g.out[h], 0xFF, n * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  lesson10::enqueue_ring<S>(g, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const double err = lesson10::max_error(g, ref);
  if (!(err <= lesson10::tolerance(gpus)))
    return at + ": error " + kl::grade::num(err) + " against the float64 sum (at most " +
           kl::grade::num(lesson10::tolerance(gpus)) + "; an element never written is NaN)";
  std::vector<float> first(n), other(n);
  CUDA_CHECK(cudaMemcpy(first.data(), g.out[0], n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int h = 1; h < gpus; ++h) {
    CUDA_CHECK(cudaMemcpy(other.data(), g.out[h], n * sizeof(float), cudaMemcpyDeviceToHost));
    if (std::memcmp(first.data(), other.data(), n * sizeof(float)) != 0)
      return at + ": GPU " + std::to_string(h) + " holds other bits than GPU 0";
  }
  return {};
}

template <class S>
kl::grade::Failure check_ring() {
  kl::grade::Failure f = on_paper<S>();
  if (!f.empty()) return f;
  std::vector<std::size_t> sizes = {1, 5, 4097, 1000003};
  if (!kl::grade::sanitized()) sizes.push_back((std::size_t{1} << 22) + 3);
  for (std::size_t n : sizes) {
    f = on_gpus<S>(group_size(), n);
    if (!f.empty()) return f;
  }
  return {};
}

// Times step 4 with schedule `Mine` against the solution's on 2^26 floats a GPU (256 MiB), every visible GPU.
template <class Mine, class Solution>
kl::grade::Speed race_ring() {
  if (kl::grade::sanitized()) return {};
  const int gpus = group_size();
  const std::size_t n = std::size_t{1} << 26;
  lesson10::GroupOwner owner(gpus, n);
  lesson10::Group& g = owner.g;
  for (int h = 0; h < gpus; ++h) {
    lesson10::OnGpu on(h);
    CUDA_CHECK(cudaMemset(const_cast<float*>(g.in[h]), 0, n * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  const auto mine = [&](cudaStream_t s) { lesson10::enqueue_ring<Mine>(g, s); };
  const auto solution = [&](cudaStream_t s) { lesson10::enqueue_ring<Solution>(g, s); };
  return kl::grade::race(mine, solution, [&] { return on_gpus<Mine>(gpus, n); });
}

}  // namespace

TEST_CASE("exercise 10.1 [cpu]: the ring's schedule, played on paper for G = 2 .. 8") {
  for (int gpus = 2; gpus <= lesson10::kMaxGpus; ++gpus) {
    INFO("G = " << gpus);
    CHECK(lesson10::simulate_ring<graded::RingSchedule>(gpus) == "");
  }
}

TEST_SUITE("gpu") {
  TEST_CASE("exercise 10.1: the ring's schedule in step 4's kernel") {
    const int gpus = group_size();
    if (gpus < 2) return kl::grade::not_graded("10.1", lesson10::group_missing(gpus, gpus));
    kl::grade::verdict("10.1", check_ring<graded::RingSchedule>(),
                       race_ring<graded::RingSchedule, solution::RingSchedule>());
  }

  TEST_CASE("wrong 10.1: the chunks walk the ring the wrong way") {
    kl::grade::wrong_variant("10.1", "wrong_direction", kl::grade::Fails::check,
                             on_paper<wrong_direction::RingSchedule>(), {});
  }
}
