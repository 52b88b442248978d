// Grades exercise 05 (built twice: against exercises/ as exercise05_test, against solutions/ as
// solution05_test). Everything is in the "gpu" suite, which is what the exercise's ctest entry runs:
// the warp-per-row top-K built on topk_insert_exercise, for K = 1, 5 and 32, against the float64
// reference (indices exactly, probabilities within the f32 tolerance).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <topk_insert.cuh>  // exercises/ or solutions/, by include path
#include "common/random.hpp"
#include "lessons/05_topk_fusion/problem.cuh"

namespace {

template <int K>
void check_exercise(const std::vector<float>& x, std::int64_t rows, int vocab) {
  CAPTURE(K);
  CAPTURE(rows);
  CAPTURE(vocab);
  const kl::DeviceBuffer<float> dx(x);
  kl::DeviceBuffer<float> prob(rows * K);
  kl::DeviceBuffer<int> idx(rows * K);
  prob.poison();
  idx.poison();
  const int warps_per_block = 8;
  topk_exercise<K><<<static_cast<unsigned>((rows + warps_per_block - 1) / warps_per_block), 32 * warps_per_block>>>(
      dx.data(), rows, vocab, prob.data(), idx.data());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  const lesson05::Tolerance tol = lesson05::tolerance(lesson05::Dtype::f32);
  const lesson05::Reference ref = lesson05::reference(x, rows, vocab, K);
  CHECK(lesson05::max_error(prob.download(), idx.download(), ref, x, tol, true) <= tol.rel);
}

template <int K>
void check_k() {
  for (int vocab : {K, 100, 1000, 4097, 50257}) {
    const std::int64_t rows = vocab < 1000 ? 200 : 40;
    check_exercise<K>(kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(vocab + K)), rows, vocab);
    check_exercise<K>(kl::integer_floats(rows * vocab, -4, 4, kl::seed_for(vocab + K + 1)), rows, vocab);  // ties
    auto rising = kl::normal_floats(rows * vocab, 0, 1, kl::seed_for(vocab + K + 2));  // the list changes often
    for (std::int64_t i = 0; i < rows * vocab; ++i) rising[i] += static_cast<float>(i % vocab) * 0.01f;
    check_exercise<K>(rising, rows, vocab);
  }
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 05: K = 1 (the skeleton's maximum is already right)") { check_k<1>(); }
  TEST_CASE("exercise 05: K = 5") { check_k<5>(); }
  TEST_CASE("exercise 05: K = 32") { check_k<32>(); }
}
