// Lesson 09, the product layer: the table of steps main.cu and test.cu walk, the tensor-core limit, and
// the run of the chosen steps on one shape. The table is step 1 (lesson 07's flash_mma, the baseline,
// compiled for the build's architectures), the Hopper steps (hopper.cu, compiled for sm_90a alone), then
// lesson 07's library row (cuBLAS with S materialised). PyTorch's SDPA rows, one per backend, come from
// scripts/torch_attention.py, in the same CSV. A student may skip this file: the ideas are in steps/.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    flash_mma              baseline: lesson 07's step 6, FA2 on mma.sync + ldmatrix, 128-query blocks, cp.async x2
//   2    wgmma                  a warpgroup's S = QK^T and O += PV by wgmma from shared memory, P from registers;
//                               cp.async x2
//   3    tma                    K, V (and Q) by TMA boxes on mbarriers, 3 stages; one thread issues every load
//   4    warp_specialized       a producer warpgroup feeds TMA, 2 consumer groups compute; setmaxnreg 24 / 240
//   5    overlap                S of tile j and PV of tile j-1 in flight together; the softmax runs under the PV GEMM
//   6    wide_tiles             step 5 on 128-key tiles, 3 stages; 3 consumer groups at D = 64: half the
//                               barriers and row reductions per key
//   7    persistent             step 6 in one block per SM drawing query tiles from a counter: the next tile's
//                               loads run under the last P.V and O's store
//   8    next_s                 step 7 with the next tile's first S = QK^T issued before this tile's O store,
//                               once its Q has landed: the store runs under the GEMM
//   9    dispatch               picks step 3, 7 or 8 by D, causal and S (step 1 where there is no sm_90a code)
//   lib  cublas_materialised_S  cuBLAS batched GEMM -> S in memory, lesson 04 softmax, batched GEMM
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/arch.cuh"
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

// ---- the dispatcher ---------------------------------------------------------------------------------------

// The step attention() runs (a number of the table below), from the H100 sweep (results/h100/lesson09.csv):
// step 8 at D = 128 from S = 512, causal from S = 4096, step 7 below (there step 8's early S lost: on causal
// rows, and on the short rows, most on the H200), at D = 64 from S = 2048, causal from S = 4096; step 3 below at
// D = 64 (rows of few key tiles: step 3's two blocks of 256 threads per SM keep more warps computing). Step 1
// where this process has no sm_90a code for the GPU.
inline int choose_step(int dim, bool causal, int seq, bool hopper) {
  if (!hopper) return 1;
  if (dim == 128) return seq < (causal ? 4096 : 512) ? 7 : 8;
  return seq >= (causal ? 4096 : 2048) ? 8 : 3;
}

// attention(): the chosen step's launcher (steps 2-8 are hopper_steps()[0 ... 6]).
inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s) {
  const int step = choose_step(p.dim, p.causal, p.seq, hopper_available());
  if (step == 1) launch_flash_mma(p, ws, s);
  else hopper_steps()[step - 2].launch(p, ws, s);
}

// ---- the table of steps ---------------------------------------------------------------------------------

// Step 1 (sm_80), the Hopper steps of hopper.cu, the dispatcher, then the library row.
inline std::vector<Step> ladder_steps() {
  std::vector<Step> steps = {
      kl::step("flash_mma", "baseline: lesson 07's step 6, FA2 on mma.sync + ldmatrix, 128-query blocks, cp.async x2",
               launch_flash_mma)
          .needs(80),
  };
  const std::vector<Step>& hopper = hopper_steps();
  steps.insert(steps.end(), hopper.begin(), hopper.end());
  steps.push_back(kl::step("dispatch", "picks step 3, 7 or 8 by D, causal and S (step 1 where there is no sm_90a code)",
                           launch_dispatch)
                      .needs(80));
  steps.push_back(kl::step("cublas_materialised_S",
                           "cuBLAS batched GEMM -> S in memory, lesson 04 softmax, batched GEMM", launch_library)
                      .library());
  return steps;
}

inline const std::vector<Step> kSteps = ladder_steps();

// Runs a step: validates the shape first (no launch on bad input); a step of sm_90a code is refused (n/a)
// where this process has none for the GPU, decided by lesson09_hopper's code (hopper_missing). Call it
// as lesson09::run_step: lesson07::run_step, found through Problem, takes the same arguments.
inline void run_step(const Step& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p);
  if (st.arch_specific) kl::refuse_if(hopper_missing());
  st.launch(p, ws, s);
}

// ---- the tensor-core limit --------------------------------------------------------------------------------

// Every step, the library row and the limit run back to back for this long before they are timed: a
// run of these kernels takes the GPU to its power limit, where its clock drops, and each step is
// measured at the clock it sustains rather than the one the previous step left (lesson 08's NOTES).
constexpr double kWarmupMs = 500;

// The driver's measure_limits hook: cuBLAS's f16 GEMM of 8192³ (f32 accumulation), sustained, in this run.
inline void measure_limits(kl::Limits& limits, const kl::DeviceInfo&) {
  limits.peak_tflops = kl::measure_tensor_tflops(kWarmupMs);
  std::printf("limit:  cuBLAS f16 GEMM 8192^3 %.0f TFLOP/s (the tensor-core peak every %% of limit is of)\n",
              limits.peak_tflops);
}

// ---- one shape --------------------------------------------------------------------------------------------

// Fresh inputs, the f32 GPU reference on ~4096 sampled rows, then the chosen steps through the driver
// (poison, run, check, time), as lesson 07's flash part.
inline std::vector<kl::Row> run_shape(const Problem& shape, kl::Context<Launcher>& cx) {
  lesson07::DeviceQkvo d(shape);
  const Problem p = d.on(shape);
  fill_inputs(p, d);
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
  const kl::Trial trial{proto, [&] { d.o.poison(); }, [&] { return max_error(d.o.download(), ref, rows, p.dim); },
                        kRel};
  return kl::run_steps(cx, trial, [&](const Step& st, cudaStream_t s) { lesson09::run_step(st, p, ws, s); });
}

// The executable: its step table, options, shapes and run, for the driver (main.cu).
inline kl::Lesson<Launcher, Problem> lesson() {
  using kl::Option;
  kl::Lesson<Launcher, Problem> l;
  l.id = "09";
  l.title = "attention O = softmax(Q K^T scale) V on Hopper: wgmma, TMA and warp specialisation";
  l.steps = kSteps;
  l.options = {
      {"batch", Option::size, "the batch B (default 16); N or 2^E"},
      {"heads", Option::size, "heads per batch entry H (default 16)"},
      {"seq", Option::size, "sequence length S, any S >= 1 (default 4096)"},
      {"dim", Option::size, "head dimension D, 64 or 128 (default 64)"},
      {"causal", Option::flag, "query i attends to keys j <= i only"},
      {"scale", Option::text, "softmax(Q K^T * X) (default 1/sqrt(D))", false},
  };
  l.dtypes = {"f16"};
  l.sweep_help = "S = 128 ... 16384 with B = 65536 / S, H = 16, for D = 64 and 128, causal and not";
  l.notes =
      "Inputs are uniform in [-sqrt(3), sqrt(3)) (unit variance), f16; accumulation f32; output f16.\n"
      "Checked against an f32 GPU reference on ~4096 sampled rows. FLOPs counted: 4 B H S^2 D (half of it\n"
      "when causal). Steps marked sm_90a run on sm_90 GPUs only (H100, H200); elsewhere they are n/a.\n"
      "The library row is n/a where its materialised S and P (2 x B H S^2 f16) would exceed 16 GiB.\n";
  l.shapes = shapes;
  l.device_bytes = [](const Problem& p, const kl::Args&) { return bytes(p); };
  l.measure_limits = measure_limits;
  l.warmup_ms = kWarmupMs;
  l.legend = [](const kl::Args&) { return lesson07::error_legend(); };
  l.run = run_shape;
  return l;
}

}  // namespace lesson09
