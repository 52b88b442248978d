// Lesson 02 — warp shuffle: the step table (from lesson 01's best step to the copy bandwidth: warp
// shuffles, 16-byte loads, several loads in flight; then the CUB baseline) that main.cu runs and
// test.cu checks. The steps are in steps/, one a file.
#pragma once
#include <vector>

#include "lessons/02_warp_shuffle/problem.cuh"
#include "lessons/02_warp_shuffle/steps/01_block_atomic.cuh"
#include "lessons/02_warp_shuffle/steps/02_warp_shuffle_down.cuh"
#include "lessons/02_warp_shuffle/steps/03_warp_butterfly.cuh"
#include "lessons/02_warp_shuffle/steps/04_float4.cuh"
#include "lessons/02_warp_shuffle/steps/05_float4_unrolled.cuh"
#include "lessons/02_warp_shuffle/steps/06_cg_reduce.cuh"

namespace lesson02 {

// {name, idea, {launcher, deterministic}, library}
inline const std::vector<kl::SumStep> kSteps = {
    {"block_atomic",
     "lesson 01's best: shared-memory block tree, one atomicAdd per block (float atomics: last bits vary)",
     {lesson01::launch_block_atomic, false}},
    {"warp_shuffle_down",
     "grid-stride partials, __shfl_down_sync warp sum, one atomicAdd per warp (float atomics: last bits vary)",
     {launch_warp_shuffle_down, false}},
    {"warp_butterfly",
     "as 2 with the __shfl_xor_sync butterfly: every lane holds the sum (float atomics: last bits vary)",
     {launch_warp_butterfly, false}},
    {"float4",
     "as 2 with 16-byte float4 loads (scalar head and tail) (float atomics: last bits vary)",
     {launch_float4, false}},
    {"float4_unrolled",
     "as 4 with 4 independent float4 loads in flight per thread (float atomics: last bits vary)",
     {launch_float4_unrolled, false}},
    {"cg_reduce",
     "as 5 with cooperative_groups::reduce for the warp sum (float atomics: last bits vary)",
     {launch_cg_reduce, false}},
    {"cub", "cub::DeviceReduce::Sum", {kl::launch_cub_sum, true}, true},
};

}  // namespace lesson02
