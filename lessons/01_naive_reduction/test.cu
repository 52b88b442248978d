// Lesson 01 checks: the step table on the CPU, and the shared reduction checks (common/sum_checks.hpp)
// over every step on the GPU. The premises behind those checks are tested in common/test_common.cu.
#include <doctest/doctest.h>

#include "common/sum_checks.hpp"
#include "lessons/01_naive_reduction/reduce.cuh"

TEST_CASE("the step table: unique names, one library baseline, last") { kl::sum_checks::step_table(lesson01::kLesson); }

TEST_SUITE("gpu") {
  TEST_CASE("the reduction checks every lesson runs (common/sum_checks.hpp)") { kl::sum_checks::all(lesson01::kLesson); }
}
