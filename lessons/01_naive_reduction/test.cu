// Lesson 01 checks: the CPU cases test the premises (reference, exact whole-number sums); the
// "gpu" suite runs every step of the table on fresh inputs with a poisoned output.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/01_naive_reduction/reduce.cuh"

using lesson01::kSteps;

namespace {

// Sizes from the foundation's list; KL_SANITIZE=1 (compute-sanitizer runs) keeps only small ones.
std::vector<std::size_t> test_sizes() {
  std::vector<std::size_t> all = {1, 2, 31, 32, 33, 1000, 4097, 999983, std::size_t{1} << 24, std::size_t{1} << 28};
  if (std::getenv("KL_SANITIZE")) all = {1, 2, 31, 33, 1000, 4097, 70001};
  return all;
}

float run_step(const kl::SumStep& st, const kl::DeviceBuffer<float>& x, std::size_t n, int poison = 0xFF) {
  kl::DeviceBuffer<float> out(1);
  kl::Scratch scratch;
  out.poison(poison);
  st.launch(x.data(), n, out.data(), scratch, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(1)[0];
}

}  // namespace

TEST_CASE("the step table: unique names, one library baseline, climbing order") {
  std::set<std::string> names;
  int library = 0;
  for (const auto& st : kSteps) {
    CHECK(names.insert(st.name).second);
    CHECK((st.launch != nullptr));
    library += st.library;
  }
  CHECK(library == 1);
  CHECK(kSteps[std::size(kSteps) - 1].library);  // the library comes last in the table
}

TEST_CASE("premise of the exact checks: float sums of small whole numbers are exact in any order") {
  auto v = kl::integer_floats(1 << 20, -4, 4, kl::seed_for(1));
  float forward = 0, backward = 0;
  for (float x : v) forward += x;
  for (auto it = v.rbegin(); it != v.rend(); ++it) backward += *it;
  const double exact = kl::ref_sum(v.data(), v.size()).sum;
  CHECK(forward == exact);
  CHECK(backward == exact);
}

TEST_CASE("premise of the tolerance: a sequential float sum of uniform[-1,1] data passes, a dropped element does not") {
  const std::size_t n = 4097;
  auto v = kl::uniform_floats(n, -1, 1, kl::seed_for(2));
  const kl::SumRef ref = kl::ref_sum(v.data(), n);
  float s = 0;
  for (float x : v) s += x;
  CHECK(kl::sum_close(s, ref, n));
  CHECK_FALSE(kl::sum_close(s - v[17], ref, n));
}

TEST_SUITE("gpu") {
  TEST_CASE("every step sums whole numbers exactly, at every size") {
    for (std::size_t n : test_sizes()) {
      const auto host = kl::integer_floats(n, -4, 4, kl::seed_for(n));
      const double exact = kl::ref_sum(host.data(), n).sum;
      const kl::DeviceBuffer<float> x(host);
      for (const auto& st : kSteps) {
        CAPTURE(n);
        CAPTURE(st.name);
        CHECK(run_step(st, x, n) == exact);
      }
    }
  }

  TEST_CASE("every step matches the float64 sum of real-valued data within tolerance") {
    for (std::size_t n : test_sizes()) {
      if (n > (std::size_t{1} << 24)) continue;
      for (int dist = 0; dist < 2; ++dist) {
        const auto host = dist == 0 ? kl::uniform_floats(n, -1, 1, kl::seed_for(n + 7))
                                    : kl::normal_floats(n, 3.0, 1e30, kl::seed_for(n + 8));  // huge magnitudes
        const kl::SumRef ref = kl::ref_sum(host.data(), n);
        const kl::DeviceBuffer<float> x(host);
        for (const auto& st : kSteps) {
          CAPTURE(n);
          CAPTURE(dist);
          CAPTURE(st.name);
          const float got = run_step(st, x, n);
          CHECK(kl::sum_close(got, ref, n));
        }
      }
    }
  }

  TEST_CASE("n = 0 sums to 0 without a launch error") {
    const kl::DeviceBuffer<float> x(1);
    for (const auto& st : kSteps) {
      CAPTURE(st.name);
      CHECK(run_step(st, x, 0) == 0.0f);
    }
  }

  TEST_CASE("special values: NaN propagates, +inf stays +inf, +inf with -inf gives NaN") {
    const std::size_t n = 100003;
    auto base = kl::uniform_floats(n, -1, 1, kl::seed_for(3));
    struct Case { float a, b; } cases[] = {{NAN, 0.f}, {INFINITY, 1.f}, {INFINITY, -INFINITY}};
    for (const auto& c : cases) {
      auto host = base;
      host[12345] = c.a;
      host[n - 1] = c.b;
      const double ref = kl::ref_sum(host.data(), n).sum;
      const kl::DeviceBuffer<float> x(host);
      for (const auto& st : kSteps) {
        CAPTURE(st.name);
        CAPTURE(c.a);
        const float got = run_step(st, x, n, 0x7F);  // finite poison: an unwritten NaN result fails
        if (std::isnan(ref)) CHECK(std::isnan(got));
        else CHECK(got == ref);
      }
    }
  }

  TEST_CASE("deterministic steps give the same bits every run") {
    const std::size_t n = 999983;
    const auto host = kl::uniform_floats(n, -1, 1, kl::seed_for(4));
    const kl::DeviceBuffer<float> x(host);
    for (const auto& st : kSteps) {
      if (!st.deterministic) continue;
      CAPTURE(st.name);
      CHECK(run_step(st, x, n) == run_step(st, x, n));
    }
  }
}
