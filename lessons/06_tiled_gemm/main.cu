// lesson06: runs every step of the SGEMM ladder (steps/, table in gemm.cuh) on D = act(alpha A B + beta C +
// bias), checks each against a float64 reference, and times the ones that are right against the FP32
// peak (SMs x 128 FMA x 2 x clock) and cuBLAS in the same run. Steps 1-6 and `cublas` compute
// alpha A B + beta C; step 7 and `cublas+epilogue` add the bias and the activation.
#include "lessons/06_tiled_gemm/run.cuh"

int main(int argc, char** argv) { return kl::run_lesson(lesson06::lesson(), argc, argv); }
