// Grades exercise 03 (built twice: against exercises/ as exercise03_test, against solutions/ as
// solution03_test). Every block's partial must equal, bit for bit, the sum in the order of a
// sequential-addressing tree; the interleaved tree the skeleton starts from adds in another order,
// so its last bits differ on real-valued data and it fails.
#include <doctest/doctest.h>

#include <cstring>

#include <sequential_exercise.cuh>  // exercises/ or solutions/, by include path
#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/03_block_tree/block_tree.cuh"

namespace {

constexpr unsigned kThreads = lesson03::kBlock;

// The block sums of x as a sequential-addressing tree adds them, in float on the CPU.
std::vector<float> sequential_tree(const std::vector<float>& x, std::size_t blocks) {
  std::vector<float> partial(blocks);
  for (std::size_t b = 0; b < blocks; ++b) {
    float s[kThreads];
    for (unsigned t = 0; t < kThreads; ++t) s[t] = b * kThreads + t < x.size() ? x[b * kThreads + t] : 0.f;
    for (unsigned half = kThreads / 2; half > 0; half /= 2)
      for (unsigned t = 0; t < half; ++t) s[t] += s[t + half];
    partial[b] = s[0];
  }
  return partial;
}

std::vector<float> run_exercise(const std::vector<float>& host) {
  const std::size_t blocks = (host.size() + kThreads - 1) / kThreads;
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> partial(blocks);
  partial.poison();
  reduce_sequential_exercise<<<static_cast<unsigned>(blocks), kThreads, kThreads * sizeof(float)>>>(
      x.data(), host.size(), partial.data());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  return partial.download();
}

// Blocks whose partial differs (in bits) from the expected one.
int mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  int bad = 0;
  for (std::size_t b = 0; b < want.size(); ++b) bad += std::memcmp(&got[b], &want[b], sizeof(float)) != 0;
  return bad;
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("exercise 03: every block sums its elements (whole numbers, exact)") {
    for (std::size_t n : {std::size_t{1}, std::size_t{33}, std::size_t{4097}, std::size_t{999983}}) {
      CAPTURE(n);
      const auto whole = kl::integer_floats(n, -4, 4, kl::seed_for(n));
      const auto got = run_exercise(whole);
      double total = 0;
      for (float p : got) total += p;
      CHECK(total == kl::ref_sum(whole.data(), n).sum);
      CHECK(mismatches(got, sequential_tree(whole, got.size())) == 0);
    }
  }

  TEST_CASE("exercise 03: the block adds in the order of sequential addressing (bit for bit)") {
    for (std::size_t n : {std::size_t{4097}, std::size_t{999983}}) {
      CAPTURE(n);
      const auto real = kl::uniform_floats(n, -1, 1, kl::seed_for(n + 1));
      const auto want = sequential_tree(real, (n + kThreads - 1) / kThreads);
      CHECK(mismatches(run_exercise(real), want) == 0);
    }
  }
}
