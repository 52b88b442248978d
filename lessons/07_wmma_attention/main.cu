// lesson07: runs the attention steps (attention.cuh) on the tile problem (B tiles of 16×16×16) and on
// long sequences (flash: Q, K, V [B, H, S, D]), checks each against a reference, and times the ones
// that are right: the tile part against the measured copy bandwidth (it moves 2 KiB per tile for 16
// KFLOP), the flash part against the tensor-core peak of a cuBLAS f16 GEMM measured in this run.
#include "lessons/07_wmma_attention/attention.cuh"

int main(int argc, char** argv) {
  using kl::Option;
  kl::Lesson<lesson07::Launcher, lesson07::Shape> lesson;
  lesson.id = "07";
  lesson.title = "attention O = softmax(Q K^T scale) V on the tensor cores: the 16x16 tile, then flash attention";
  lesson.steps = lesson07::kSteps;
  lesson.options = {
      {"part", Option::text,
       "tile: B independent 16x16x16 attentions (steps 1-4 and their library row);\n"
       "               flash: Q, K, V [B, H, S, D] (steps 5-6 and their library row);\n"
       "               both (the default) runs each part at its default shape",
       false},
      {"batch", Option::size, "tile: the number of tiles (default 65536); flash: the batch (default 16); N or 2^E"},
      {"heads", Option::size, "flash: heads per batch entry (default 16)"},
      {"seq", Option::size, "flash: sequence length, any S >= 1 (default 4096)"},
      {"dim", Option::size, "flash: head dimension, 64 or 128 (default 64)"},
      {"causal", Option::flag, "flash: query i attends to keys j <= i only"},
      {"scale", Option::text, "softmax(Q K^T * X) (default 1/sqrt(D))", false},
  };
  lesson.dtypes = {"f16"};
  lesson.sweep_help =
      "tile: B = 4096 and 65536; flash: S = 128 ... 16384 with B = 65536 / S, H = 16,\n"
      "               for D = 64 and 128, causal and not";
  lesson.notes =
      "Inputs are uniform in [-sqrt(3), sqrt(3)) (unit variance), f16; accumulation f32; output f16.\n"
      "Checked against float64 on the CPU (tile) or an f32 GPU reference on ~4096 sampled rows (flash).\n"
      "FLOPs counted: 4 B H S^2 D (half of it when causal). The library row of the flash part is n/a\n"
      "where its materialised S and P (2 x B H S^2 f16) would exceed 16 GiB.\n";
  lesson.shapes = [](const kl::Args& a) {
    std::vector<lesson07::Shape> shapes = lesson07::shapes(a);
    lesson07::check_step_part(a.step, a);
    return shapes;
  };
  lesson.device_bytes = [](const lesson07::Shape& sh, const kl::Args&) { return lesson07::bytes(sh.second); };
  lesson.measure_limits = lesson07::measure_limits;
  lesson.run = lesson07::run_shape;
  return kl::run_lesson(lesson, argc, argv);
}
