// lesson09: runs the attention steps (attention.cuh) on Q, K, V [B, H, S, D], checks each against a
// reference, and times the ones that are right against the tensor-core peak of a cuBLAS f16 GEMM
// measured in this run. The Hopper steps are compiled for sm_90a alone: elsewhere they are n/a and the
// lesson runs its baseline (step 1) and the library row.
#include "lessons/09_hopper_attention/attention.cuh"

int main(int argc, char** argv) { return kl::run_lesson(lesson09::lesson(), argc, argv); }
