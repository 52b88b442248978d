// lesson02: runs every step of the warp-shuffle ladder (reduce.cuh), checks each against a float64
// sum, and times the ones that are right against the measured copy bandwidth and CUB.
// The driver is common/ladder.hpp; what the reduction lessons share, common/sum_problem.cuh
// (the kernels' side) and common/sum_lesson.cuh (the executable's).
#include "common/sum_lesson.cuh"
#include "lessons/02_warp_shuffle/reduce.cuh"

int main(int argc, char** argv) {
  const kl::Lesson<kl::SumKernel, std::size_t> lesson =
      kl::sum_lesson("02", "warp shuffle: sum of n floats", lesson02::kSteps);
  return kl::run_lesson(lesson, argc, argv);
}
