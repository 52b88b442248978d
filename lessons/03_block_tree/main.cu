// lesson03: runs every step of the block-tree ladder (block_tree.cuh), checks each against a
// float64 sum, times the ones that are right against the measured copy bandwidth and CUB, then
// shows max, L2 norm and mean computed by the same template as the fastest step.
#include "common/reduce_lesson.cuh"
#include "lessons/03_block_tree/block_tree.cuh"

int main(int argc, char** argv) {
  return kl::guarded_main("lesson03", [&] { return kl::sum_lesson_main(lesson03::kLesson, argc, argv); });
}
