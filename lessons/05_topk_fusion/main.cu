// lesson05: runs every step of the softmax + top-K ladder (topk.cuh; the run in run.cuh) on logits
// [R, V], checks each against a float64 reference, and times the ones that are right against the
// measured copy bandwidth (the floor: one read of the logits). A step that cannot take the shape says
// why (n/a). --sample times the sampler (sample.cuh) instead.
#include "lessons/05_topk_fusion/run.cuh"

int main(int argc, char** argv) { return kl::run_lesson(lesson05::lesson(), argc, argv); }
