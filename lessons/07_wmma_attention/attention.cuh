// Lesson 07, the product layer: attention O = softmax(Q·Kᵀ·scale)·V on the tensor cores. It gathers
// the steps (steps/), adds the library baseline (cuBLAS batched GEMM, lesson 04's softmax, cuBLAS
// batched GEMM) and the tensor-core limit, holds the table of steps main.cu and test.cu walk, and runs
// the chosen steps of one shape. A student may skip this file: the ideas are in steps/.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    tile_reference         [tile] 1 warp/block: WMMA QK^T -> smem, lanes 0-15 softmax a row at a time, WMMA PV
//   2    tile_all_lanes         [tile] step 1 with lanes 16-31 on the odd rows: 8 passes, half-warp shuffles
//   3    tile_multi_warp        [tile] step 2 with 8 warps per block, one tile per warp
//   4    tile_registers         [tile] mma.sync: softmax on the accumulator fragment, P reused as the A operand
//   lib  cublas_softmax_cublas  [tile] cuBLAS batched GEMM + lesson 04 softmax + cuBLAS batched GEMM
//   5    flash_wmma             [flash] 64-query blocks loop over 64-key tiles: WMMA + online (max, sum) + output
//                               rescale
//   6    flash_mma              [flash] 128-query blocks, mma.sync, Q/S/P/O in registers, swizzled ldmatrix, cp.async
//                               x2
//   lib  cublas_materialised_S  [flash] cuBLAS batched GEMM -> S in memory, lesson 04 softmax, batched GEMM
#pragma once
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/cublas.cuh"
#include "common/ladder.hpp"
#include "common/random.hpp"
#include "common/timing.cuh"
#include "lessons/04_online_softmax/softmax.cuh"
#include "lessons/07_wmma_attention/host.cuh"
#include "lessons/07_wmma_attention/problem.cuh"
#include "lessons/07_wmma_attention/steps/01_tile_reference.cuh"
#include "lessons/07_wmma_attention/steps/02_tile_all_lanes.cuh"
#include "lessons/07_wmma_attention/steps/03_tile_multi_warp.cuh"
#include "lessons/07_wmma_attention/steps/04_tile_registers.cuh"
#include "lessons/07_wmma_attention/steps/05_flash_wmma.cuh"
#include "lessons/07_wmma_attention/steps/06_flash_mma.cuh"

namespace lesson07 {

// Scratch the library baseline keeps between runs (handle, S and P, cuDNN's workspace for lesson 04's
// softmax), so that a repeated run allocates nothing and can be captured in a CUDA graph.
struct Workspace {
  cublasHandle_t cublas = nullptr;
  kl::DeviceBuffer<unsigned char> cublas_ws;
  kl::DeviceBuffer<__half> s, prob;
  lesson04::Workspace softmax_ws;
  Workspace() = default;
  ~Workspace() {
    if (cublas) cublasDestroy(cublas);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

// ---- the library baseline: cuBLAS batched GEMM, lesson 04's softmax, cuBLAS batched GEMM ---------------

// The materialised S and P (f16, B·H·S² each) may take at most this much device memory.
constexpr double kLibraryBudgetBytes = 16.0 * (1 << 30);

inline double library_bytes(const Problem& p) {
  return 2.0 * 2.0 * static_cast<double>(p.heads_total()) * p.seq * static_cast<double>(p.seq);
}

// Causal: S[i][j] = -inf above the diagonal, before the softmax (one block row per query row).
__global__ void mask_upper(__half* s, int seq) {
  const std::int64_t row = blockIdx.x;
  const int i = static_cast<int>(row % seq);
  for (int j = i + 1 + threadIdx.x; j < seq; j += blockDim.x) s[row * seq + j] = __float2half(-INFINITY);
}

using kl::cublas_check;

// S = scale·Q·Kᵀ (f16, f32 accumulation), P = softmax(S) by lesson 04's dispatcher, O = P·V. cuBLAS
// is column-major: a row-major X is its transpose, so S (row-major) is computed as Sᵀ = K·Qᵀ.
inline void launch_library(const Problem& p, Workspace& ws, cudaStream_t s) {
  const double need = library_bytes(p);
  if (need > kLibraryBudgetBytes)
    throw kl::NotSupported("the materialised S and P need " + std::to_string(static_cast<long long>(need / (1 << 30))) +
                           " GiB, over the 16 GiB budget");
  if (p.heads_total() > 0x7fffffff) throw kl::NotSupported("more than 2^31 - 1 heads for one batched call");
  if (!ws.cublas) {
    cublas_check(cublasCreate(&ws.cublas), "cublasCreate");
    ws.cublas_ws.resize(std::size_t{32} << 20);
    cublas_check(cublasSetWorkspace(ws.cublas, ws.cublas_ws.data(), ws.cublas_ws.size()), "cublasSetWorkspace");
  }
  const auto n = static_cast<std::size_t>(p.heads_total()) * p.seq * p.seq;
  if (ws.s.size() < n) {
    kl::ensure_fits(2.0 * n * 2.0, "the library baseline's S and P");
    ws.s.resize(n);
    ws.prob.resize(n);
  }
  cublas_check(cublasSetStream(ws.cublas, s), "cublasSetStream");
  const int S = p.seq, D = p.dim, batch = static_cast<int>(p.heads_total());
  const float zero = 0.f, one = 1.f;
  const long long sd = static_cast<long long>(S) * D, ss = static_cast<long long>(S) * S;
  cublas_check(cublasGemmStridedBatchedEx(ws.cublas, CUBLAS_OP_T, CUBLAS_OP_N, S, S, D, &p.scale, p.k, CUDA_R_16F, D,
                                          sd, p.q, CUDA_R_16F, D, sd, &zero, ws.s.data(), CUDA_R_16F, S, ss, batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (S = Q K^T)");
  if (p.causal) {
    mask_upper<<<static_cast<unsigned>(p.rows()), 256, 0, s>>>(ws.s.data(), S);
    CUDA_CHECK_LAUNCH();
  }
  lesson04::softmax(ws.s.data(), ws.prob.data(), p.rows(), S, ws.softmax_ws, 1.f, s);
  cublas_check(cublasGemmStridedBatchedEx(ws.cublas, CUBLAS_OP_N, CUBLAS_OP_N, D, S, S, &one, p.v, CUDA_R_16F, D, sd,
                                          ws.prob.data(), CUDA_R_16F, S, ss, &zero, p.o, CUDA_R_16F, D, sd, batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (O = P V)");
}

// ---- the tensor-core limit ------------------------------------------------------------------------------

// A cuBLAS f16 GEMM of 8192³ in this run (common/cublas.cuh).
using kl::measure_tensor_tflops;

// The driver's measure_limits hook: the flash part's limit.
inline void measure_limits(kl::Limits& limits, const kl::DeviceInfo&) {
  limits.peak_tflops = measure_tensor_tflops();
  std::printf("limit:  cuBLAS f16 GEMM 8192^3 %.0f TFLOP/s (flash part; the tile part is held to the copy)\n",
              limits.peak_tflops);
}

// The driver's legend: how errors are measured (lessons 07 and 09).
inline std::string error_legend() {
  char line[120];
  std::snprintf(line, sizeof line,
                "error:  max |o - ref| / (|ref| + %.1f), passes at <= %.0e;  [g] = CUDA-graph replay", kFloor, kRel);
  return line;
}

// ---- the table of steps ---------------------------------------------------------------------------------

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);
using Step = kl::Step<Launcher>;

// The tile steps, their library row, the flash steps, theirs: labelled 1-4, lib, 5-6, lib.
inline const std::vector<Step> kSteps = {
    kl::step("tile_reference", "1 warp/block: WMMA QK^T -> smem, lanes 0-15 softmax a row at a time, WMMA PV",
             launch_tile_reference)
        .part("tile"),
    kl::step("tile_all_lanes", "step 1 with lanes 16-31 on the odd rows: 8 passes, half-warp shuffles",
             launch_tile_all_lanes)
        .part("tile"),
    kl::step("tile_multi_warp", "step 2 with 8 warps per block, one tile per warp", launch_tile_multi_warp)
        .part("tile"),
    kl::step("tile_registers", "mma.sync: softmax on the accumulator fragment, P reused as the A operand",
             launch_tile_registers)
        .needs(80)
        .part("tile"),
    kl::step("cublas_softmax_cublas", "cuBLAS batched GEMM + lesson 04 softmax + cuBLAS batched GEMM", launch_library)
        .library()
        .part("tile"),
    kl::step("flash_wmma", "64-query blocks loop over 64-key tiles: WMMA + online (max, sum) + output rescale",
             launch_flash_wmma)
        .part("flash"),
    kl::step("flash_mma", "128-query blocks, mma.sync, Q/S/P/O in registers, swizzled ldmatrix, cp.async x2",
             launch_flash_mma)
        .needs(80)
        .part("flash"),
    kl::step("cublas_materialised_S", "cuBLAS batched GEMM -> S in memory, lesson 04 softmax, batched GEMM",
             launch_library)
        .library()
        .part("flash"),
};

inline Part part_of(const Step& st) { return std::string(st.part) == "tile" ? Part::tile : Part::flash; }

// Runs a step: validates the shape for its part first (no launch on bad input).
inline void run_step(const Step& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p, part_of(st));
  st.launch(p, ws, s);
}

// --step must name a step of the parts asked for ("--part tile --step 5" is refused); "lib" matches
// both library rows, and each part runs its own.
inline void check_step_part(const std::optional<std::string>& step, const kl::Args& a) {
  if (!step) return;
  const std::string part = part_option(a);
  const std::vector<int> found = kl::find_steps(kSteps, *step);
  for (int i : found)
    if (part == "both" || part == kSteps[i].part) return;
  throw kl::UsageError("step '" + kl::escaped(*step) + "' belongs to --part " + kSteps[found[0]].part);
}

// ---- one shape ------------------------------------------------------------------------------------------

// Fresh inputs, the reference (float64 on the CPU for the tile, f32 on the GPU on ~4096 sampled rows
// for flash), then the chosen steps of the shape's part through the driver (poison, run, check, time).
inline std::vector<kl::Row> run_shape(const Shape& shape, kl::Context<Launcher>& cx) {
  const Part part = shape.first;
  kl::Context<Launcher> pc = cx;
  pc.chosen.clear();
  for (int i : cx.chosen)
    if (part_of(cx.steps[i]) == part) pc.chosen.push_back(i);
  if (pc.chosen.empty()) return {};
  DeviceQkvo d(shape.second);
  const Problem p = d.on(shape.second);
  fill_inputs(p, d);
  std::vector<std::int64_t> rows;
  std::vector<double> ref;
  if (cx.check) {
    if (part == Part::tile) {  // the whole output, in float64 on the CPU
      ref = reference(to_floats(d.q.download()), to_floats(d.k.download()), to_floats(d.v.download()), p);
      rows = all_rows(p);
    } else {
      rows = sample_rows(p);
      ref = reference_gpu(p, rows);
    }
  }
  if (part == Part::tile) {
    std::printf("\n%lld tiles of 16x16x16 f16: %.1f MiB moved; floor at copy bandwidth = %.4f ms\n",
                static_cast<long long>(p.batch), bytes(p) / 1048576.0, bytes(p) / (cx.limits.copy_gbps * 1e9) * 1e3);
  } else {
    std::printf("\nB x H x S x D = %lld x %d x %d x %d%s, f16: %.1f GFLOP; at the tensor-core peak = %.4f ms\n",
                static_cast<long long>(p.batch), p.heads, p.seq, p.dim, p.causal ? ", causal" : "", flops(p) / 1e9,
                flops(p) / (cx.limits.peak_tflops * 1e12) * 1e3);
  }
  Workspace ws;
  kl::Row proto{"", "", "f16", shape_text(shape)};
  if (part == Part::tile) proto.bytes = bytes(p);
  proto.flops = flops(p);
  const kl::Trial trial{proto, [&] { d.o.poison(); }, [&] { return max_error(d.o.download(), ref, rows, p.dim); },
                        kRel};
  return kl::run_steps(pc, trial, [&](const Step& st, cudaStream_t s) { run_step(st, p, ws, s); });
}

// The executable: its step table, options, shapes and run, for the driver (main.cu).
inline kl::Lesson<Launcher, Shape> lesson() {
  using kl::Option;
  kl::Lesson<Launcher, Shape> l;
  l.id = "07";
  l.title = "attention O = softmax(Q K^T scale) V on the tensor cores: the 16x16 tile, then flash attention";
  l.steps = kSteps;
  l.options = {
      {"part", Option::text,
       "tile: B independent 16x16x16 attentions (steps 1-4 and their library row);\n"
       "               flash: Q, K, V [B, H, S, D] (steps 5-6 and their library row);\n"
       "               both (the default) runs each part at its default shape",
       false},
      {"batch", Option::size, "tile: the number of tiles (default 65536); flash: the batch (default 16); N or 2^E"},
      {"heads", Option::size, "flash: heads per batch entry (default 16)"},
      {"seq", Option::size, "flash: sequence length, any S >= 1 (default 4096)"},
      {"dim", Option::size, "flash: head dimension, 64 or 128 (default 64)"},
      {"causal", Option::flag, "flash: query i attends to keys j <= i only"},
      {"scale", Option::text, "softmax(Q K^T * X) (default 1/sqrt(D))", false},
  };
  l.dtypes = {"f16"};
  l.sweep_help =
      "tile: B = 4096 and 65536; flash: S = 128 ... 16384 with B = 65536 / S, H = 16,\n"
      "               for D = 64 and 128, causal and not";
  l.notes =
      "Inputs are uniform in [-sqrt(3), sqrt(3)) (unit variance), f16; accumulation f32; output f16.\n"
      "Checked against float64 on the CPU (tile) or an f32 GPU reference on ~4096 sampled rows (flash).\n"
      "FLOPs counted: 4 B H S^2 D (half of it when causal). The library row of the flash part is n/a\n"
      "where its materialised S and P (2 x B H S^2 f16) would exceed 16 GiB.\n";
  l.shapes = [](const kl::Args& a) {
    std::vector<Shape> out = shapes(a);
    check_step_part(a.step, a);
    return out;
  };
  l.device_bytes = [](const Shape& sh, const kl::Args&) { return bytes(sh.second); };
  l.measure_limits = measure_limits;
  l.legend = [](const kl::Args&) { return error_legend(); };
  l.run = run_shape;
  return l;
}

}  // namespace lesson07
