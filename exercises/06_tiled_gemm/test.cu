// Grades exercise 06 (built twice: against exercises/ as exercise06_test, against solutions/ as
// solution06_test). Everything is in the "gpu" suite, which is what the exercise's ctest entry runs:
// gemm_exercise must hold two shared-memory stages and match the float64 reference on shapes with
// tails in M, N and K, unaligned leading dimensions, and C read with beta.
#include <doctest/doctest.h>

#include <array>
#include <vector>

#include <double_buffer.cuh>  // exercises/ or solutions/, by include path
#include "common/buffer.cuh"
#include "common/random.hpp"
#include "lessons/06_tiled_gemm/parts.cuh"

namespace {

void check_exercise(int m, int n, int k, int pad) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(pad);
  const int lda = k + pad, ldb = n + pad, ldd = n + pad;
  const auto a = kl::normal_floats(std::size_t(m) * lda, 0, 1, kl::seed_for(m + 3 * n + 7 * k));
  const auto b = kl::normal_floats(std::size_t(k) * ldb, 0, 1, kl::seed_for(m + 3 * n + 7 * k + 1));
  lesson06::HostInputs host;
  host.c = kl::normal_floats(std::size_t(m) * ldd, 0, 1, kl::seed_for(m + 3 * n + 7 * k + 2));
  const kl::DeviceBuffer<float> da(a), db(b), dc(host.c);
  kl::DeviceBuffer<float> dd(std::size_t(m) * ldd);
  dd.poison();
  lesson06::Problem p{da.data(), db.data(), dc.data(), dd.data(), nullptr, m, n, k, lda, ldb, ldd, ldd};
  p.beta = 0.5f;
  exercise06::gemm_exercise<<<lesson06::tile_grid(p, lesson06::kBM, lesson06::kBN), lesson06::kThreads>>>(p);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  const lesson06::Reference ref = lesson06::reference_cpu(a.data(), lda, b.data(), ldb, m, n, k);
  CHECK(lesson06::max_error(dd.download(), p, ref, host) <= lesson06::tolerance(k));
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 06: the kernel holds two shared-memory stages") {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, exercise06::gemm_exercise));
    const std::size_t stage = lesson06::kBK * (lesson06::Loader128::kLdA + lesson06::Loader128::kLdB) * sizeof(float);
    CHECK(attr.sharedSizeBytes == 2 * stage);
  }

  TEST_CASE("exercise 06: matches the float64 reference, tails and padding included") {
    for (auto [m, n, k] : {std::array<int, 3>{1, 1, 1},
                           {128, 128, 8},
                           {128, 128, 16},
                           {129, 255, 17},
                           {300, 200, 1000},
                           {513, 130, 7}}) {
      check_exercise(m, n, k, 0);
      check_exercise(m, n, k, 3);
    }
  }
}
