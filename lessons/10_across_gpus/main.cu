// lesson10: the all-reduce across the GPUs of one machine, step by step (allreduce.cuh), each step
// checked on every GPU against a float64 sum and timed against the measured peer copy and NCCL.
#include "lessons/10_across_gpus/host.cuh"

int main(int argc, char** argv) { return kl::run_lesson(lesson10::lesson(), argc, argv); }
