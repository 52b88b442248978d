// Lesson 01 — naive reductions: the step table (the ladder from one thread to one atomic per block,
// then the CUB baseline) that main.cu runs and test.cu checks. The steps are in steps/, one a file.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    one_thread             one thread reads and adds all n values
//   2    atomic_per_element     every thread atomicAdds its element into the result (float atomics: last bits vary)
//   3    grid_stride            grid-stride partial per thread, one atomicAdd per thread (float atomics: last bits
//                               vary)
//   4    block_atomic           shared-memory block sum, one atomicAdd per block (float atomics: last bits vary)
//   lib  cub                    cub::DeviceReduce::Sum
#pragma once
#include <vector>

#include "lessons/01_naive_reduction/problem.cuh"
#include "lessons/01_naive_reduction/steps/01_one_thread.cuh"
#include "lessons/01_naive_reduction/steps/02_atomic_per_element.cuh"
#include "lessons/01_naive_reduction/steps/03_grid_stride.cuh"
#include "lessons/01_naive_reduction/steps/04_block_atomic.cuh"

namespace lesson01 {

// kl::step(name, idea, {launcher, deterministic, one accumulator, most n}). Step 1 runs at most 2^22
// values (~0.15 s on an H100; 2^26 take 2.4 s) and its time is scaled to n.
inline const std::vector<kl::SumStep> kSteps = {
    kl::step("one_thread", "one thread reads and adds all n values",
             kl::SumKernel{launch_one_thread, true, true, std::size_t{1} << 22}),
    kl::step("atomic_per_element",
             "every thread atomicAdds its element into the result (float atomics: last bits vary)",
             kl::SumKernel{launch_atomic_per_element, false, true}),
    kl::step("grid_stride", "grid-stride partial per thread, one atomicAdd per thread (float atomics: last bits vary)",
             kl::SumKernel{launch_grid_stride, false}),
    kl::step("block_atomic", "shared-memory block sum, one atomicAdd per block (float atomics: last bits vary)",
             kl::SumKernel{launch_block_atomic, false}),
    kl::step("cub", "cub::DeviceReduce::Sum", kl::SumKernel{kl::launch_cub_sum, true}).library(),
};

}  // namespace lesson01
