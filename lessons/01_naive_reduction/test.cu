// Lesson 01 checks: the CPU cases test the premises (reference, exact whole-number sums); the
// "gpu" suite runs the shared reduction checks over every step of the table.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "common/random.hpp"
#include "common/reference.hpp"
#include "common/sum_checks.hpp"
#include "lessons/01_naive_reduction/reduce.cuh"

using lesson01::kSteps;

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

TEST_CASE("premise of the large-magnitude check: one float accumulator of 1e30s stalls at 2^124") {
  float s = 0.f;
  for (int i = 0; i < (1 << 26); ++i) s += 1e30f;  // the true sum is 6.7e37
  CHECK(s == std::ldexp(1.0f, 124));               // 2.13e37: then 1e30 is under half an ulp
}

TEST_SUITE("gpu") {
  TEST_CASE("the reduction checks every lesson runs (common/sum_checks.hpp)") { kl::sum_checks::all(lesson01::kLesson); }
}
