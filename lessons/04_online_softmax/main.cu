// lesson04: runs every step of the softmax ladder (steps/, table in softmax.cuh) on an [M, K] matrix,
// checks each against a float64 softmax, and times the ones that are right against the measured copy
// bandwidth and cuDNN. A step that cannot handle the shape says why and is shown as n/a.
#include <iterator>
#include <string>

#include "common/ladder.hpp"
#include "lessons/04_online_softmax/run.cuh"

int main(int argc, char** argv) {
  using lesson04::Shape;
  std::string dtype;  // the run's dtype, for the error line printed under the limits
  kl::Lesson<lesson04::Launch, Shape> lesson;
  lesson.id = "04";
  lesson.title = "online softmax: softmax of each row of an [M, K] matrix";
  lesson.steps.assign(std::begin(lesson04::kSteps), std::end(lesson04::kSteps));
  lesson.options = {
      {"rows", kl::Option::size, "rows (default: 2^26 / K, so M * K = 2^26 elements, well over the L2 cache)"},
      {"cols", kl::Option::size, "row length, the softmax dimension (default 4096); N or 2^E"},
  };
  lesson.dtypes = {"f32", "f16", "bf16"};
  lesson.sweep_help = "run K = 32 ... 131072 (powers of two) and 1000, 4097, 50257, each with M = 2^26 / K";
  lesson.notes =
      "Loads and stores in the dtype, arithmetic in f32.\n"
      "Bytes counted: M * K elements read + M * K written.\n";
  lesson.slow_ms = 20.0;  // step 1 at long rows: three repetitions are enough (NOTES.md)
  lesson.shapes = [&](const kl::Args& a) {
    dtype = a.dtype;
    return lesson04::shapes(a.size("rows"), a.size("cols"), a.sweep);
  };
  lesson.device_bytes = [](const Shape& sh, const kl::Args& a) {
    return 2.0 * static_cast<double>(sh.first) * static_cast<double>(sh.second) *
           lesson04::dtype_bytes(lesson04::parse_dtype(a.dtype));
  };
  lesson.measure_limits = [&](kl::Limits&, const kl::DeviceInfo&) {
    lesson04::print_error_line(lesson04::parse_dtype(dtype));
  };
  lesson.run = lesson04::run_shape;
  return kl::run_lesson(lesson, argc, argv);
}
