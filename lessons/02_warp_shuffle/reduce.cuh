// Lesson 02 — warp shuffle: the step table (from lesson 01's best step to the copy bandwidth: warp
// shuffles, 16-byte loads, several loads in flight; then the CUB baseline) that main.cu runs and
// test.cu checks. The steps are in steps/, one a file.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    block_atomic           lesson 01's best: shared-memory block tree, one atomicAdd per block (float atomics:
//                               last bits vary)
//   2    warp_shuffle_down      grid-stride partials, __shfl_down_sync warp sum, one atomicAdd per warp (float atomics:
//                               last bits vary)
//   3    warp_butterfly         as 2 with the __shfl_xor_sync butterfly: every lane holds the sum (float atomics: last
//                               bits vary)
//   4    float4                 as 2 with 16-byte float4 loads (scalar head and tail) (float atomics: last bits vary)
//   5    float4_unrolled        as 4 with 4 independent float4 loads in flight per thread (float atomics: last bits
//                               vary)
//   6    cg_reduce              as 5 with cooperative_groups::reduce for the warp sum (float atomics: last bits vary)
//   lib  cub                    cub::DeviceReduce::Sum
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

// kl::step(name, idea, {launcher, deterministic}), .library() for the baseline (common/step.hpp).
inline const std::vector<kl::SumStep> kSteps = {
    kl::step("block_atomic",
             "lesson 01's best: shared-memory block tree, one atomicAdd per block (float atomics: last bits vary)",
             kl::SumKernel{lesson01::launch_block_atomic, false}),
    kl::step("warp_shuffle_down",
             "grid-stride partials, __shfl_down_sync warp sum, one atomicAdd per warp (float atomics: last bits vary)",
             kl::SumKernel{launch_warp_shuffle_down, false}),
    kl::step("warp_butterfly",
             "as 2 with the __shfl_xor_sync butterfly: every lane holds the sum (float atomics: last bits vary)",
             kl::SumKernel{launch_warp_butterfly, false}),
    kl::step("float4", "as 2 with 16-byte float4 loads (scalar head and tail) (float atomics: last bits vary)",
             kl::SumKernel{launch_float4, false}),
    kl::step("float4_unrolled",
             "as 4 with 4 independent float4 loads in flight per thread (float atomics: last bits vary)",
             kl::SumKernel{launch_float4_unrolled, false}),
    kl::step("cg_reduce", "as 5 with cooperative_groups::reduce for the warp sum (float atomics: last bits vary)",
             kl::SumKernel{launch_cg_reduce, false}),
    kl::step("cub", "cub::DeviceReduce::Sum", kl::SumKernel{kl::launch_cub_sum, true}).library(),
};

}  // namespace lesson02
