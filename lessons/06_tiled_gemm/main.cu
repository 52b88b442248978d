// lesson06: runs every step of the SGEMM ladder (steps/, table in gemm.cuh) on D = act(alpha A B + beta C +
// bias), checks each against a float64 reference, and times the ones that are right against the FP32
// peak (SMs x 128 FMA x 2 x clock) and cuBLAS in the same run. Steps 1-6 and `cublas` compute
// alpha A B + beta C; step 7 and `cublas+epilogue` add the bias and the activation.
#include "common/ladder.hpp"
#include "lessons/06_tiled_gemm/gemm.cuh"
#include "lessons/06_tiled_gemm/problem.cuh"
#include "lessons/06_tiled_gemm/tune.cuh"

int main(int argc, char** argv) {
  using kl::Option;
  lesson06::Workspace ws;  // split-K's slices and the cuBLAS handle, shared by every shape of the run
  kl::Lesson<lesson06::Launch, lesson06::Shape> l;
  l.id = "06";
  l.title = "SGEMM D = act(alpha A B + beta C + bias), float32, row-major";
  l.steps = lesson06::kSteps;
  l.options = {
      {"m", Option::size, "rows of A and D (default 4096); a number or 2^E"},
      {"n", Option::size, "columns of B and D (default 4096)"},
      {"k", Option::size, "the inner dimension: columns of A, rows of B (default 4096)"},
      {"size", Option::size, "M = N = K = N: one size for all three (instead of --m, --n, --k)"},
      {"alpha", Option::text, "scales A B (default 1)", false},
      {"beta", Option::text, "scales C (default 0: C is not read)", false},
      {"bias", Option::text,
       "bias of step 7 and cublas+epilogue: per row (m), per column (n), a full M x N matrix, or none (default n)",
       false},
      {"act", Option::text,
       "activation of step 7 and cublas+epilogue: none, relu, leaky, gelu_tanh, gelu_erf (default gelu_tanh)", false},
      {"slope", Option::text, "LeakyReLU's slope for x < 0 (default 0.01)", false},
      {"tune", Option::flag,
       "time step 6's candidate tile configurations with K split 1, 2, 4, 8 ways, at the shape (or the sweep's); "
       "below sm_80 step 5's kernel",
       false},
  };
  l.sweep_help = "M = N = K = 256 ... 8192, and 4097^3, 1000 x 3000 x 777, 8192 x 64 x 8192";
  l.notes = "FLOPs counted: 2 M N K. The limit: FP32 peak = SMs x 128 FMA/clock x 2 x the SM clock.\n";
  l.slow_ms = 50.0;  // the naive step takes ~0.1-1 s at 4096^3 - 8192^3: three repetitions
  l.shapes = lesson06::shapes;
  l.device_bytes = [](const lesson06::Shape& sh, const kl::Args&) { return lesson06::device_bytes(sh); };
  l.measure_limits = lesson06::fp32_limit;
  l.run = [&ws](const lesson06::Shape& sh, kl::Context<lesson06::Launch>& cx) {
    return lesson06::run_shape(sh, cx, ws);
  };
  return kl::run_lesson(l, argc, argv);
}
