// lesson05: runs every step of the softmax + top-K ladder (topk.cuh) on logits [R, V], checks each
// against a float64 reference, and times the ones that are right against the measured copy
// bandwidth (the floor: one read of the logits). A step that cannot take the shape says why (n/a).
#include "common/ladder.hpp"
#include "lessons/05_topk_fusion/topk.cuh"

int main(int argc, char** argv) {
  kl::Lesson<lesson05::Launch, lesson05::Shape> lesson;
  lesson.id = "05";
  lesson.title = "fused softmax + top-K: the K most likely entries of each row of logits [R, V]";
  lesson.steps = lesson05::kSteps;
  lesson.options = {
      {"rows", kl::Option::size, "rows of logits (default 4096); N or 2^E"},
      {"vocab", kl::Option::size, "logits per row, the softmax dimension (default 50257)"},
      {"k", kl::Option::size, "probabilities kept per row, 1 to 64 and at most V (default 10)"},
      {"logits", kl::Option::text,
       "normal (default: normal(0, 2)), masked (20 finite per row, the rest -inf) or equal (all 1)", false},
  };
  lesson.dtypes = {"f32", "f16", "bf16"};
  lesson.sweep_help =
      "R = 4096 with V in {32000, 50257, 128256} x K in {1, 10, 50}, K = 2 ... 64 at\n"
      "               V = 50257, and the decode case R = 8, V = 128256, K = 50";
  lesson.notes =
      "Logits are loaded in the dtype, arithmetic and results are f32.\n"
      "Bytes counted (the floor): R * V logits read once + R * K (probability, index) pairs written.\n";
  lesson.slow_ms = 20.0;  // step 1 takes tens of ms at V = 128256: three repetitions are enough
  lesson.shapes = lesson05::shapes;
  lesson.device_bytes = [](const lesson05::Shape& sh, const kl::Args& a) {
    return lesson05::device_bytes(sh, lesson05::parse_dtype(a.dtype));
  };
  lesson.measure_limits = [](kl::Limits&, const kl::DeviceInfo&) { lesson05::print_error_legend(); };
  lesson.run = lesson05::run;
  return kl::run_lesson(lesson, argc, argv);
}
