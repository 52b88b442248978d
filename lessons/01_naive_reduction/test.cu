// Lesson 01 checks: the step table and the shapes on the CPU, and the shared reduction checks
// (common/sum_checks.hpp) over every step on the GPU. The premises behind those checks are tested in
// common/test_common.cu.
#include <doctest/doctest.h>

#include <vector>

#include "common/sum_checks.hpp"
#include "common/sum_lesson.cuh"
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

TEST_CASE("step 1 runs at most 2^22 values (seconds per launch above), the others any n") {
  CHECK(lesson01::kSteps[0].launch.most_n == std::size_t{1} << 22);
  for (std::size_t i = 1; i < lesson01::kSteps.size(); ++i) CHECK(lesson01::kSteps[i].launch.most_n == 0);
}

TEST_SUITE("gpu") {
  TEST_CASE("the reduction checks every lesson runs (common/sum_checks.hpp)") { kl::sum_checks::all(lesson01::kSteps); }

  TEST_CASE("above most_n a step is timed on the first most_n values, its time scaled and marked; a sweep skips it") {
    const kl::DeviceInfo dev = kl::device_info();
    kl::Timer timer(dev);
    kl::Args args;
    kl::Limits limits;
    limits.copy_gbps = 1000;
    kl::SumContext cx{lesson01::kSteps, {0, 2}, args, dev, limits, timer, true, 3, 200.0};
    const std::size_t n = std::size_t{1} << 23;
    const std::vector<kl::Row> rows = kl::run_sum(n, cx);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].name == "one_thread[scaled x2]");
    CHECK(rows[1].name == "grid_stride");
    for (const kl::Row& r : rows) {
      CHECK(r.ok);
      CHECK(r.shape == "n=8388608");
      CHECK(r.bytes == 4.0 * n);
    }
    CHECK(rows[0].ms.median > 10 * rows[1].ms.median);
    args.sweep = true;
    const std::vector<kl::Row> swept = kl::run_sum(n, cx);
    REQUIRE(swept.size() == 1);
    CHECK(swept[0].name == "grid_stride");
  }
}
