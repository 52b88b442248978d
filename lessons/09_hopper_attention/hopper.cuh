// Lesson 09, the sm_90a half as the rest of the lesson sees it. wgmma and setmaxnreg exist only in
// arch-specific sm_90a code, which runs on sm_90 GPUs alone (H100, H200, GH200), so the Hopper steps are
// compiled in a target of their own, lesson09_hopper (hopper.cu, -gencode=arch=compute_90a,code=sm_90a),
// while main.cu and test.cu keep the portable architectures of the ladder. The two halves meet here: the
// launcher type, the table of the Hopper steps, and whether this process can run them.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "common/step.hpp"
#include "lessons/09_hopper_attention/problem.cuh"

namespace lesson07 {
struct Workspace;  // the library row's scratch (lesson 07's attention.cuh); the steps take it and ignore it
}  // namespace lesson07

namespace lesson09 {

using lesson07::Workspace;

// Every launcher of the table has lesson 07's signature, so that its flash_mma and library rows serve as they are.
using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);
using Step = kl::Step<Launcher>;

// "" when this process holds sm_90a code for the GPU it runs on, else why not: "needs sm_90a (this GPU is
// sm_120; ...)". Decided by the code, not by the GPU's number: it looks up a kernel of lesson09_hopper,
// which the CUDA runtime finds on an sm_90 GPU and nowhere else (sm_90a SASS only, no PTX to JIT).
std::string hopper_missing();

inline bool hopper_available() { return hopper_missing().empty(); }

// The Hopper steps (2, 3, ...) in ladder order, each kl::step(name, idea, launcher).needs(90).arch_specific():
// not a library row, needs sm_90a. The table is in hopper.cu, beside the step files it includes, whose
// kernels and launchers are compiled there, for sm_90a only.
const std::vector<Step>& hopper_steps();

}  // namespace lesson09
