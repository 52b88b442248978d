// lesson02: runs every step of the warp-shuffle ladder (reduce.cuh), checks each against a float64
// sum, and times the ones that are right against the measured copy bandwidth and CUB.
// The driver (CLI, checks, timing, table, CSV) is shared with lessons 01 and 03.
#include "common/reduce_lesson.cuh"
#include "lessons/02_warp_shuffle/reduce.cuh"

int main(int argc, char** argv) {
  return kl::guarded_main("lesson02", [&] { return kl::sum_lesson_main(lesson02::kLesson, argc, argv); });
}
