// Lesson 03 — block tree: the step table (steps 1-7 climb the classic shared-memory tree; steps 8-9
// use the register -> warp shuffle -> shared memory -> block hierarchy and finish in two launches or
// in one; then the CUB baseline) that main.cu runs and test.cu checks, and the lesson's run for one
// n, which adds max, L2 norm and mean from step 9's template. The steps are in steps/, one a file.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    interleaved_divergent  smem tree, tid % (2*stride) == 0: divergent warps
//   2    interleaved_strided    smem tree, index = 2*stride*tid: no divergence, bank conflicts
//   3    sequential             smem tree, s[t] += s[t + half]: no bank conflicts
//   4    first_add_on_load      each thread loads and adds two elements first
//   5    unrolled_last_warp     last 64 values: warp shuffles, no __syncthreads
//   6    unrolled               block size a template parameter: the tree fully unrolled
//   7    many_per_thread        grid fills the GPU once; grid-stride float4 loads
//   8    two_pass               4 float4 loads in flight, warp->block reduce, 2nd kernel
//   9    single_pass            as two_pass; the last block reduces the partials
//   lib  cub                    cub::DeviceReduce::Sum
#pragma once
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/sum_lesson.cuh"
#include "lessons/03_block_tree/host.cuh"
#include "lessons/03_block_tree/problem.cuh"
#include "lessons/03_block_tree/steps/01_interleaved_divergent.cuh"
#include "lessons/03_block_tree/steps/02_interleaved_strided.cuh"
#include "lessons/03_block_tree/steps/03_sequential.cuh"
#include "lessons/03_block_tree/steps/04_first_add_on_load.cuh"
#include "lessons/03_block_tree/steps/05_unrolled_last_warp.cuh"
#include "lessons/03_block_tree/steps/06_unrolled.cuh"
#include "lessons/03_block_tree/steps/07_many_per_thread.cuh"
#include "lessons/03_block_tree/steps/08_two_pass.cuh"
#include "lessons/03_block_tree/steps/09_single_pass.cuh"

namespace lesson03 {

// kl::step(name, idea, {launcher, deterministic}), .library() for the baseline. No float atomics anywhere: every step
// is deterministic.
inline const std::vector<kl::SumStep> kSteps = {
    kl::step("interleaved_divergent", "smem tree, tid % (2*stride) == 0: divergent warps",
             kl::SumKernel{launch_interleaved_divergent, true}),
    kl::step("interleaved_strided", "smem tree, index = 2*stride*tid: no divergence, bank conflicts",
             kl::SumKernel{launch_interleaved_strided, true}),
    kl::step("sequential", "smem tree, s[t] += s[t + half]: no bank conflicts", kl::SumKernel{launch_sequential, true}),
    kl::step("first_add_on_load", "each thread loads and adds two elements first",
             kl::SumKernel{launch_first_add_on_load, true}),
    kl::step("unrolled_last_warp", "last 64 values: warp shuffles, no __syncthreads",
             kl::SumKernel{launch_unrolled_last_warp, true}),
    kl::step("unrolled", "block size a template parameter: the tree fully unrolled",
             kl::SumKernel{launch_unrolled, true}),
    kl::step("many_per_thread", "grid fills the GPU once; grid-stride float4 loads",
             kl::SumKernel{launch_many_per_thread, true}),
    kl::step("two_pass", "4 float4 loads in flight, warp->block reduce, 2nd kernel",
             kl::SumKernel{launch_two_pass<kl::SumOp, Identity>, true}),
    kl::step("single_pass", "as two_pass; the last block reduces the partials",
             kl::SumKernel{launch_single_pass<kl::SumOp, Identity>, true}),
    kl::step("cub", "cub::DeviceReduce::Sum", kl::SumKernel{kl::launch_cub_sum, true}).library(),
};

// ---- the same template, other operations ---------------------------------------------------------

// The extra rows of each n: max, L2 norm and mean through step 9's template, each checked
// against its float64 reference, then timed like the steps.
inline std::vector<kl::Row> other_operations(std::size_t n, kl::Timer& timer, int reps) {
  const std::vector<float> host = kl::uniform_floats(n, -1.0, 1.0, kl::seed_for(n));
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> out(1);
  Scratch scratch;
  std::vector<kl::Row> rows;
  for (const OpCase& c :
       op_cases(host, launch_single_pass<kl::MaxOp, Identity>, launch_single_pass<kl::SumOp, SquareThenSqrt>,
                launch_single_pass<kl::SumOp, DivideByCount>)) {
    auto launch = [&](cudaStream_t s) { c.launch(x.data(), n, out.data(), scratch, s); };
    kl::Row row{"op", std::string("single_pass ") + c.name, "f32", "n=" + std::to_string(n)};
    row.bytes = 4.0 * n;
    out.poison();
    launch(timer.stream());
    CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
    const float got = out.download(1)[0];
    row.err = kl::scaled_error(got, c.ref, std::fabs(c.ref));
    row.ok = op_close(got, c.ref, c.tol);
    kl::time_if_ok(timer, row, launch, kl::TimingOptions{reps});
    rows.push_back(row);
  }
  return rows;
}

// One n of lesson03: the sum ladder (kl::run_sum), then, when the whole ladder runs (no --step), max,
// L2 norm and mean through step 9's template. (A sweep drops only steps over 1 s per run, which none
// of this lesson's steps comes near, so a shortened `chosen` means --step.)
inline std::vector<kl::Row> run_with_other_operations(std::size_t n, kl::SumContext& cx) {
  const bool whole_ladder = cx.chosen.size() == cx.steps.size();
  std::vector<kl::Row> rows = kl::run_sum(n, cx);
  if (!whole_ladder) return rows;
  const std::vector<kl::Row> more = other_operations(n, cx.timer, cx.reps);
  std::printf("\nthe same template, other operations (n = %zu):\n", n);
  kl::print_table(std::cout, more, cx.limits);
  rows.insert(rows.end(), more.begin(), more.end());
  return rows;
}

}  // namespace lesson03
