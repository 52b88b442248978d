// lesson08: runs the GEMM steps (gemm.cuh) on D = act(α·A·B + β·C + bias), checks each against an f32
// reference of all of D, and times the ones that are right against cuBLAS and the tensor-core rate of a
// cuBLAS GEMM measured in this run. The Hopper steps are compiled for sm_90a alone: elsewhere they are n/a
// and the lesson runs its baseline (step 1) and the library rows.
#include "lessons/08_hopper_gemm/host.cuh"

int main(int argc, char** argv) { return kl::run_lesson(lesson08::lesson(), argc, argv); }
