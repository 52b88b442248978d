// lesson01: runs every step of the naive-reduction ladder (reduce.cuh), checks each against a
// float64 sum, and times the ones that are right against the measured copy bandwidth and CUB.
// The driver (CLI, checks, timing, table, CSV) is shared with lessons 02 and 03.
#include "common/reduce_lesson.cuh"
#include "lessons/01_naive_reduction/reduce.cuh"

int main(int argc, char** argv) {
  return kl::guarded_main("lesson01", [&] { return kl::sum_lesson_main(lesson01::kLesson, argc, argv); });
}
