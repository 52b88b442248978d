// Lesson 08, the sm_90a half as the rest of the lesson sees it. wgmma and setmaxnreg exist only in
// arch-specific sm_90a code, which runs on sm_90 GPUs alone (H100, H200, GH200), so the Hopper steps are
// compiled in a target of their own, lesson08_hopper (hopper.cu, -gencode=arch=compute_90a,code=sm_90a),
// while main.cu and test.cu keep the portable architectures of the ladder. The two halves meet here: the
// launcher type, the table of the Hopper steps, whether this process can run them, and the best of them.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "common/step.hpp"
#include "lessons/08_hopper_gemm/problem.cuh"

namespace lesson08 {

struct Workspace;  // the library rows' handles (gemm.cuh); the steps take it and ignore it

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);
using Step = kl::Step<Launcher>;

// "" when this process holds sm_90a code for the GPU it runs on, else why not: "needs sm_90a (this GPU is
// sm_120; ...)". Decided by the code, not by the GPU's number: it looks up a kernel of lesson08_hopper,
// which the CUDA runtime finds on an sm_90 GPU and nowhere else (sm_90a SASS only, no PTX to JIT).
std::string hopper_missing();

inline bool hopper_available() { return hopper_missing().empty(); }

// The Hopper steps (2, 3, ...) in ladder order, each needing sm_90a. The table is in hopper.cu, beside
// the step files it includes, whose kernels are compiled there, for sm_90a only.
const std::vector<Step>& hopper_steps();

// The last Hopper step (step 8: clusters, fused epilogue, TMA store): gemm()'s path on sm_90 for aligned shapes.
void launch_hopper_gemm(const Problem& p, cudaStream_t s);

}  // namespace lesson08
