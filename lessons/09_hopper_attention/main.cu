// lesson09: runs the attention steps (attention.cuh) on Q, K, V [B, H, S, D], checks each against a
// reference, and times the ones that are right against the tensor-core peak of a cuBLAS f16 GEMM
// measured in this run. The Hopper steps are compiled for sm_90a alone: elsewhere they are n/a and the
// lesson runs its baseline (step 1) and the library row.
#include "lessons/09_hopper_attention/attention.cuh"

int main(int argc, char** argv) {
  using kl::Option;
  kl::Lesson<lesson09::Launcher, lesson09::Problem> lesson;
  lesson.id = "09";
  lesson.title = "attention O = softmax(Q K^T scale) V on Hopper: wgmma, TMA and warp specialisation";
  lesson.steps = lesson09::kSteps;
  lesson.options = {
      {"batch", Option::size, "the batch B (default 16); N or 2^E"},
      {"heads", Option::size, "heads per batch entry H (default 16)"},
      {"seq", Option::size, "sequence length S, any S >= 1 (default 4096)"},
      {"dim", Option::size, "head dimension D, 64 or 128 (default 64)"},
      {"causal", Option::flag, "query i attends to keys j <= i only"},
      {"scale", Option::text, "softmax(Q K^T * X) (default 1/sqrt(D))", false},
  };
  lesson.dtypes = {"f16"};
  lesson.sweep_help = "S = 128 ... 16384 with B = 65536 / S, H = 16, for D = 64 and 128, causal and not";
  lesson.notes =
      "Inputs are uniform in [-sqrt(3), sqrt(3)) (unit variance), f16; accumulation f32; output f16.\n"
      "Checked against an f32 GPU reference on ~4096 sampled rows. FLOPs counted: 4 B H S^2 D (half of it\n"
      "when causal). Steps marked sm_90a run on sm_90 GPUs only (H100, H200); elsewhere they are n/a.\n"
      "The library row is n/a where its materialised S and P (2 x B H S^2 f16) would exceed 16 GiB.\n";
  lesson.shapes = lesson09::shapes;
  lesson.device_bytes = [](const lesson09::Problem& p, const kl::Args&) { return lesson09::bytes(p); };
  lesson.measure_limits = lesson09::measure_limits;
  lesson.run = lesson09::run_shape;
  return kl::run_lesson(lesson, argc, argv);
}
