// Grades exercises 06.1 and 06.2, built twice: exercise06_test grades the files of
// exercises/06_tiled_gemm (or a student's copy), solution06_test the solutions and the wrong
// techniques kept beside them, which must fail. A GEMM kernel passes when it matches the float64
// reference on shapes with tails in M, N and K, leading dimensions wider than the matrices, C read
// with beta and a NaN in A (06.1 also when it holds two shared-memory stages), and runs at least 80 %
// of the solution's speed at M = N = K = 4096 (A, B and D: 192 MiB, well above any L2 cache; the
// product is bound by the FMAs, not by memory).
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/check.cuh"
#include "common/grade.cuh"
#include "common/random.hpp"
#include "lessons/06_tiled_gemm/host.cuh"
#include "lessons/06_tiled_gemm/parts.cuh"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <double_buffer.cuh>
#include <register_tile.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/06_tiled_gemm/double_buffer.cuh"
#include "solutions/06_tiled_gemm/register_tile.cuh"
}  // namespace solution
#endif
namespace one_stage_prefetch {
#include "solutions/06_tiled_gemm/wrong/one_stage_prefetch.cuh"
}
namespace one_output_per_thread {
#include "solutions/06_tiled_gemm/wrong/one_output_per_thread.cuh"
}

namespace {

using lesson06::Problem;
using Launch = void (*)(const Problem&, cudaStream_t);
using Kernel = void (*)(Problem);

// Exercise 06.1's kernel is launched as steps 4 and 5 are: one block of 256 threads per 128x128 tile
// of D. (Exercise 06.2's file holds its own launcher.)
template <Kernel K>
void launch_tiles(const Problem& p, cudaStream_t s) {
  K<<<lesson06::tile_grid(p, lesson06::kBM, lesson06::kBN), lesson06::kThreads, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// D = 1.5 A B + 0.5 C on one shape, against the float64 reference; `nan_at` >= 0 puts a NaN in A at
// row nan_at, column K - 1 (the last slice of K), which must make that row of D NaN. Returns the
// failure ("" when right).
kl::grade::Failure check_shape(Launch launch, int m, int n, int k, int pad, int nan_at = -1) {
  std::string at = "M x N x K = " + std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k);
  if (pad > 0) at += ", leading dimensions " + std::to_string(pad) + " wider than the matrices";
  if (nan_at >= 0) at += ", a NaN in A at row " + std::to_string(nan_at) + ", column K - 1";
  const int lda = k + pad, ldb = n + pad, ldd = n + pad;
  const std::uint64_t seed = kl::seed_for(m + 3 * n + 7 * k + 11 * pad);
  auto a = kl::normal_floats(std::size_t(m) * lda, 0, 1, seed);
  if (nan_at >= 0) a[std::size_t(nan_at) * lda + k - 1] = NAN;
  const auto b = kl::normal_floats(std::size_t(k) * ldb, 0, 1, seed + 1);
  lesson06::HostInputs host;
  host.c = kl::normal_floats(std::size_t(m) * ldd, 0, 1, seed + 2);
  const kl::DeviceBuffer<float> da(a), db(b), dc(host.c);
  kl::DeviceBuffer<float> dd(std::size_t(m) * ldd);
  dd.poison();  // NaN: an output the kernel does not write fails
  Problem p{da.data(), db.data(), dc.data(), dd.data(), nullptr, m, n, k, lda, ldb, ldd, ldd};
  p.alpha = 1.5f;
  p.beta = 0.5f;
  launch(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const lesson06::Reference ref = lesson06::reference_cpu(a.data(), lda, b.data(), ldb, m, n, k);
  const double err = lesson06::max_error(dd.download(), p, ref, host), tol = lesson06::tolerance(k);
  if (!(err <= tol))
    return at + ": max error " + kl::grade::num(err) +
           " (relative to the scale of the terms), expected <= " + kl::grade::num(tol);
  return {};
}

// Tails in M, N and K (1, 7, 17, 31, 33, 129, 255, 513, 4097: none a multiple of the tiles), whole
// tiles, K shorter than one slice, then each shape again with wider leading dimensions (unaligned rows).
kl::grade::Failure check_gemm(Launch launch) {
  std::vector<std::array<int, 3>> shapes = {{1, 1, 1},     {128, 128, 8},  {128, 128, 16},  {129, 255, 17},
                                            {513, 130, 7}, {31, 33, 4097}, {300, 200, 1000}};
  if (kl::grade::sanitized()) shapes.resize(5);
  for (int pad : {0, 3})
    for (auto [m, n, k] : shapes)
      if (auto f = check_shape(launch, m, n, k, pad); !f.empty()) return f;
  return check_shape(launch, 129, 255, 17, 0, 100);
}

// Exercise 06.1 also holds two shared-memory stages of the A and B tiles (static shared memory).
kl::grade::Failure check_stages(Kernel kernel) {
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const std::size_t stage = lesson06::kBK * (lesson06::Loader128::kLdA + lesson06::Loader128::kLdB) * sizeof(float);
  if (attr.sharedSizeBytes != 2 * stage)
    return "the kernel holds " + std::to_string(attr.sharedSizeBytes) + " bytes of shared memory, " +
           kl::grade::num(double(attr.sharedSizeBytes) / stage) + " times one stage of the A and B tiles (" +
           std::to_string(stage) + " bytes); expected two stages, " + std::to_string(2 * stage) + " bytes";
  return {};
}

template <Kernel K>
kl::grade::Failure check_double_buffer() {
  if (auto f = check_stages(K); !f.empty()) return f;
  return check_gemm(launch_tiles<K>);
}

// Times `mine` against the solution on D = A B, M = N = K = 4096, then checks its D there against the
// solution's (the sums of 4096 products in another order differ by far less than 1e-3).
kl::grade::Speed race_gemm(Launch mine, Launch solution) {
  if (kl::grade::sanitized()) return {};
  const int s = 4096;
  const std::size_t n = std::size_t(s) * s;
  const kl::DeviceBuffer<float> a(kl::uniform_floats(n, -1, 1, kl::seed_for(40)));
  const kl::DeviceBuffer<float> b(kl::uniform_floats(n, -1, 1, kl::seed_for(41)));
  kl::DeviceBuffer<float> d(n);
  const Problem p{a.data(), b.data(), nullptr, d.data(), nullptr, s, s, s, s, s, s, s};
  const auto with = [&](Launch l) { return [&, l](cudaStream_t st) { l(p, st); }; };
  return kl::grade::race(with(mine), with(solution), [&] {
    const kl::grade::Failure f = kl::grade::same_as_solution(with(mine), with(solution), d, 1e-3, 1e-3);
    return f.empty() ? f : "M = N = K = 4096, D's " + f;
  });
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 06.1: double buffering, two shared-memory stages") {
    kl::grade::verdict("06.1", check_double_buffer<graded::gemm_double_buffer>(),
                       race_gemm(launch_tiles<graded::gemm_double_buffer>, launch_tiles<solution::gemm_double_buffer>));
  }

  TEST_CASE("exercise 06.2: an 8x8 register tile per thread") {
    kl::grade::verdict("06.2", check_gemm(graded::launch_register_tile),
                       race_gemm(graded::launch_register_tile, solution::launch_register_tile));
  }

  TEST_CASE("wrong 06.1: prefetching into registers with one shared-memory stage is not double buffering") {
    kl::grade::wrong_variant(
        "06.1", "one_stage_prefetch", kl::grade::Fails::check,
        check_double_buffer<one_stage_prefetch::gemm_double_buffer>(),
        race_gemm(launch_tiles<one_stage_prefetch::gemm_double_buffer>, launch_tiles<solution::gemm_double_buffer>));
  }

  TEST_CASE("wrong 06.2: one output per thread (step 2) is too slow") {
    kl::grade::wrong_variant("06.2", "one_output_per_thread", kl::grade::Fails::speed,
                             check_gemm(one_output_per_thread::launch_register_tile),
                             race_gemm(one_output_per_thread::launch_register_tile, solution::launch_register_tile));
  }
}
