// lesson07: runs the attention steps (attention.cuh) on the tile problem (B tiles of 16×16×16) and on
// long sequences (flash: Q, K, V [B, H, S, D]), checks each against a reference, and times the ones
// that are right: the tile part against the measured copy bandwidth (it moves 2 KiB per tile for 16
// KFLOP), the flash part against the tensor-core peak of a cuBLAS f16 GEMM measured in this run.
#include "lessons/07_wmma_attention/attention.cuh"

int main(int argc, char** argv) { return kl::run_lesson(lesson07::lesson(), argc, argv); }
