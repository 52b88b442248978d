// Lesson 09, the problem: lesson 07's flash part, unchanged. Attention O = softmax(Q·Kᵀ·scale)·V for
// Q, K, V [B, H, S, D] in f16, f32 accumulation, f16 out, D = 64 or 128, causal or not, any S >= 1.
// Here: the problem as the kernels see it (lessons/07_wmma_attention/problem.cuh) and its validation;
// the inputs, the references, the error measure and the shapes of a run are in host.cuh.
#pragma once
#include "lessons/07_wmma_attention/problem.cuh"

namespace lesson09 {

using lesson07::Problem;

// Refuses a shape no step can take (D other than 64 and 128, sizes that overflow), before any launch.
inline void validate(const Problem& p) { lesson07::validate(p, lesson07::Part::flash); }

}  // namespace lesson09
