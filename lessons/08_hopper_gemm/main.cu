// lesson08: runs the GEMM steps (gemm.cuh) on D = act(α·A·B + β·C + bias), checks each against an f32
// reference of all of D, and times the ones that are right against cuBLAS and the tensor-core rate of a
// cuBLAS GEMM measured in this run. The Hopper steps are compiled for sm_90a alone: elsewhere they are n/a
// and the lesson runs its baseline (step 1) and the library rows.
#include "lessons/08_hopper_gemm/host.cuh"

int main(int argc, char** argv) {
  using kl::Option;
  kl::Lesson<lesson08::Launcher, lesson08::Shape> lesson;
  lesson.id = "08";
  lesson.title = "the tensor-core GEMM on Hopper: D = act(alpha A B + beta C + bias), bf16/f16 in, f32 accumulation";
  lesson.steps = lesson08::kSteps;
  lesson.options = {
      {"m", Option::size, "rows of A and D (default 8192); N or 2^E"},
      {"n", Option::size, "columns of B and D (default 8192)"},
      {"k", Option::size, "columns of A, rows of B (default 8192)"},
      {"alpha", Option::text, "D = alpha A B + ... (default 1)", false},
      {"beta", Option::text, "... + beta C (default 0: C is not read)", false},
      {"act", Option::text, "activation after the bias: none, relu, gelu_tanh (default none)"},
      {"bias", Option::flag, "add a bias per column of D (f32) before the activation"},
  };
  lesson.dtypes = {"bf16", "f16"};
  lesson.sweep_help = "squares 512 ... 16384, bias + gelu_tanh at 8192^3, M = 8192 with (N, K) of a language model";
  lesson.notes =
      "A, B, C uniform in [-1, 1), rounded to the dtype; accumulation f32; D in the dtype. Checked against an\n"
      "f32 reference of all of D. FLOPs counted: 2 M N K. Steps marked sm_90a run on sm_90 GPUs only (H100,\n"
      "H200); elsewhere they are n/a. Unfused steps and cuBLAS run a second kernel for the bias and activation.\n"
      "Each step runs back to back for 0.5 s before it is timed: times are at the clock the GPU sustains.\n";
  lesson.warmup_ms = lesson08::kWarmupMs;
  lesson.shapes = lesson08::shapes;
  lesson.device_bytes = [](const lesson08::Shape& sh, const kl::Args&) { return lesson08::device_bytes(sh); };
  lesson.measure_limits = lesson08::measure_limits;
  lesson.run = lesson08::run_shape;
  return kl::run_lesson(lesson, argc, argv);
}
