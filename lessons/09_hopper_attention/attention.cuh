// Lesson 09, the product layer: the table of steps main.cu and test.cu walk, the tensor-core limit, and
// the run of the chosen steps on one shape. The table is step 1 (lesson 07's flash_mma, the baseline,
// compiled for the build's architectures), the Hopper steps (hopper.cu, compiled for sm_90a alone), then
// lesson 07's library row (cuBLAS with S materialised). PyTorch's SDPA rows, one per backend, come from
// scripts/torch_attention.py, in the same CSV. A student may skip this file: the ideas are in steps/.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/ladder.hpp"
#include "lessons/07_wmma_attention/attention.cuh"
#include "lessons/09_hopper_attention/hopper.cuh"
#include "lessons/09_hopper_attention/host.cuh"
#include "lessons/09_hopper_attention/problem.cuh"
#include "lessons/09_hopper_attention/steps/01_flash_mma.cuh"

namespace lesson09 {

// S = scale·Q·Kᵀ by a cuBLAS batched GEMM into memory, lesson 04's softmax, O = P·V by a second one; n/a
// where S and P (2 × B·H·S² f16) would pass 16 GiB.
using lesson07::launch_library;

// ---- the table of steps ---------------------------------------------------------------------------------

// {name, idea, launcher, library, needs_sm}: step 1, the Hopper steps of hopper.cu, then the library row.
inline std::vector<Step> ladder_steps() {
  std::vector<Step> steps = {
      {"flash_mma", "baseline: lesson 07's step 6, FA2 on mma.sync + ldmatrix, 128-query blocks, cp.async x2",
       launch_flash_mma, false, 80},
  };
  const std::vector<Step>& hopper = hopper_steps();
  steps.insert(steps.end(), hopper.begin(), hopper.end());
  steps.push_back({"cublas_materialised_S", "cuBLAS batched GEMM -> S in memory, lesson 04 softmax, batched GEMM",
                   launch_library, true, 0});
  return steps;
}

inline const std::vector<Step> kSteps = ladder_steps();

// Runs a step: validates the shape first (no launch on bad input); a step of sm_90a code is refused (n/a)
// where this process has none for the GPU, decided by lesson09_hopper's code (hopper_missing). Call it
// as lesson09::run_step: lesson07::run_step, found through Problem, takes the same arguments.
inline void run_step(const Step& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p);
  if (st.arch_specific) {
    const std::string why = hopper_missing();
    if (!why.empty()) throw kl::NotSupported(why);
  }
  st.launch(p, ws, s);
}

// ---- the tensor-core limit --------------------------------------------------------------------------------

// The driver's measure_limits hook: lesson 07's cuBLAS f16 GEMM of 8192³ (f32 accumulation), in this run.
inline void measure_limits(kl::Limits& limits, const kl::DeviceInfo&) {
  limits.peak_tflops = lesson07::measure_tensor_tflops();
  std::printf("limit:  cuBLAS f16 GEMM 8192^3 %.0f TFLOP/s (the tensor-core peak every %% of limit is of)\n",
              limits.peak_tflops);
  std::printf("error:  max |o - ref| / (|ref| + %.1f), passes at <= %.0e;  [g] = CUDA-graph replay\n", kFloor, kRel);
}

// ---- one shape --------------------------------------------------------------------------------------------

// Fresh inputs, the f32 GPU reference on ~4096 sampled rows, then the chosen steps through the driver
// (poison, run, check, time), as lesson 07's flash part.
inline std::vector<kl::Row> run_shape(const Problem& shape, kl::Context<Launcher>& cx) {
  Problem p = shape;
  const auto n = static_cast<std::size_t>(p.elements());
  kl::DeviceBuffer<__half> q(n), k(n), v(n), o(n);
  fill_inputs(p, q.data(), k.data(), v.data());
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.o = o.data();
  std::vector<std::int64_t> rows;
  std::vector<double> ref;
  if (cx.check) {
    rows = sample_rows(p);
    ref = reference_gpu(p, rows);
  }
  std::printf("\nB x H x S x D = %lld x %d x %d x %d%s, f16: %.1f GFLOP; at the tensor-core peak = %.4f ms\n",
              static_cast<long long>(p.batch), p.heads, p.seq, p.dim, p.causal ? ", causal" : "", flops(p) / 1e9,
              flops(p) / (cx.limits.peak_tflops * 1e12) * 1e3);
  Workspace ws;
  kl::Row proto{"", "", "f16", shape_text(p)};
  proto.flops = flops(p);
  const kl::Trial trial{proto, [&] { o.poison(); }, [&] { return max_error(o.download(), ref, rows, p.dim); }, kRel};
  return kl::run_steps(cx, trial, [&](const Step& st, cudaStream_t s) { lesson09::run_step(st, p, ws, s); });
}

}  // namespace lesson09
