// lesson04: runs every step of the softmax ladder (steps/, table in softmax.cuh) on an [M, K] matrix,
// checks each against a float64 softmax, and times the ones that are right against the measured copy
// bandwidth and cuDNN. A step that cannot handle the shape says why and is shown as n/a.
#include "lessons/04_online_softmax/run.cuh"

int main(int argc, char** argv) { return kl::run_lesson(lesson04::lesson(), argc, argv); }
