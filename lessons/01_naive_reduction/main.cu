// lesson01: runs every step of the naive-reduction ladder (reduce.cuh), checks each against a
// float64 sum, and times the ones that are right against the measured copy bandwidth and CUB.
// The driver is common/ladder.hpp; what the reduction lessons share, common/sum_problem.cuh
// (the kernels' side) and common/sum_lesson.cuh (the executable's).
#include "common/sum_lesson.cuh"
#include "lessons/01_naive_reduction/reduce.cuh"

int main(int argc, char** argv) {
  const kl::Lesson<kl::SumKernel, std::size_t> lesson =
      kl::sum_lesson("01", "naive reductions: sum of n floats", lesson01::kSteps);
  return kl::run_lesson(lesson, argc, argv);
}
