// lesson03: runs every step of the block-tree ladder (block_tree.cuh), checks each against a
// float64 sum, times the ones that are right against the measured copy bandwidth and CUB, then
// shows max, L2 norm and mean computed by the same template as the fastest step.
// The driver is common/ladder.hpp; what the reduction lessons share, common/sum_problem.cuh
// (the kernels' side) and common/sum_lesson.cuh (the executable's).
#include "common/sum_lesson.cuh"
#include "lessons/03_block_tree/block_tree.cuh"

int main(int argc, char** argv) {
  kl::Lesson<kl::SumKernel, std::size_t> lesson = kl::sum_lesson("03", "block tree: sum of n floats", lesson03::kSteps);
  lesson.run = lesson03::run_with_other_operations;
  return kl::run_lesson(lesson, argc, argv);
}
