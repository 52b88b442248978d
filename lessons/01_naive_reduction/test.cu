// Lesson 01 checks: the step table and the shapes on the CPU, and the shared reduction checks
// (common/sum_checks.hpp) over every step on the GPU. The premises behind those checks are tested in
// common/test_common.cu.
#include <doctest/doctest.h>

#include <vector>

#include "common/sum_checks.hpp"
#include "lessons/01_naive_reduction/reduce.cuh"

TEST_CASE("the step table: unique names, one library baseline, last") { kl::sum_checks::step_table(lesson01::kSteps); }

TEST_CASE("the shapes of the reduction lessons: n = 2^26 by default, --n as given, the sweep 2^10 ... 2^28") {
  kl::Args args;
  CHECK(kl::sum_shapes(args) == std::vector<std::size_t>{std::size_t{1} << 26});
  args.sizes["n"] = 1000;
  CHECK(kl::sum_shapes(args) == std::vector<std::size_t>{1000});
  args.sizes.clear();
  args.sweep = true;
  const std::vector<std::size_t> sweep = kl::sum_shapes(args);
  REQUIRE(sweep.size() == 10);
  for (std::size_t i = 0; i < sweep.size(); ++i) CHECK(sweep[i] == std::size_t{1} << (10 + 2 * i));
}

TEST_SUITE("gpu") {
  TEST_CASE("the reduction checks every lesson runs (common/sum_checks.hpp)") { kl::sum_checks::all(lesson01::kSteps); }
}
