// Lesson 07, the product layer: attention O = softmax(Q·Kᵀ·scale)·V on the tensor cores. It gathers
// the steps (steps/), adds the library baseline (cuBLAS batched GEMM, lesson 04's softmax, cuBLAS
// batched GEMM) and the tensor-core limit, holds the table of steps main.cu and test.cu walk, and runs
// the chosen steps of one shape. A student may skip this file: the ideas are in steps/.
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

inline void cublas_check(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: cuBLAS status " + std::to_string(st));
}

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

// A cuBLAS f16 GEMM (f32 accumulation, as the steps use) of 8192³, median of 10 after 3 warm-ups,
// in TFLOP/s.
inline double measure_tensor_tflops() {
  const int n = 8192;
  kl::DeviceBuffer<__half> a(static_cast<std::size_t>(n) * n), b(a.size()), c(a.size());
  CUDA_CHECK(cudaMemset(a.data(), 0, a.size() * 2));
  CUDA_CHECK(cudaMemset(b.data(), 0, b.size() * 2));
  cublasHandle_t h;
  cublas_check(cublasCreate(&h), "cublasCreate");
  const float one = 1.f, zero = 0.f;
  const double ms = kl::median_ms(3, 10, [&] {
    cublas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16F, n, b.data(), CUDA_R_16F,
                              n, &zero, c.data(), CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  cublasDestroy(h);
  return 2.0 * n * n * static_cast<double>(n) / (ms * 1e-3) / 1e12;
}

// The driver's measure_limits hook: the flash part's limit, and how errors are measured.
inline void measure_limits(kl::Limits& limits, const kl::DeviceInfo&) {
  limits.peak_tflops = measure_tensor_tflops();
  std::printf("limit:  cuBLAS f16 GEMM 8192^3 %.0f TFLOP/s (flash part; the tile part is held to the copy)\n",
              limits.peak_tflops);
  std::printf("error:  max |o - ref| / (|ref| + %.1f), passes at <= %.0e;  [g] = CUDA-graph replay\n", kFloor, kRel);
}

// ---- the table of steps ---------------------------------------------------------------------------------

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);
using Step = kl::Step<Launcher>;

// The tile steps, their library row, the flash steps, theirs: labelled 1-4, lib, 5-6, lib.
inline const std::vector<Step> kSteps = {
    {"tile_reference", "1 warp/block: WMMA QK^T -> smem, lanes 0-15 softmax a row at a time, WMMA PV",
     launch_tile_reference, false, 0, "tile"},
    {"tile_all_lanes", "step 1 with lanes 16-31 on the odd rows: 8 passes, half-warp shuffles", launch_tile_all_lanes,
     false, 0, "tile"},
    {"tile_multi_warp", "step 2 with 8 warps per block, one tile per warp", launch_tile_multi_warp, false, 0, "tile"},
    {"tile_registers", "mma.sync: softmax on the accumulator fragment, P reused as the A operand",
     launch_tile_registers, false, 80, "tile"},
    {"cublas_softmax_cublas", "cuBLAS batched GEMM + lesson 04 softmax + cuBLAS batched GEMM", launch_library, true, 0,
     "tile"},
    {"flash_wmma", "64-query blocks loop over 64-key tiles: WMMA + online (max, sum) + output rescale",
     launch_flash_wmma, false, 0, "flash"},
    {"flash_mma", "128-query blocks, mma.sync, Q/S/P/O in registers, swizzled ldmatrix, cp.async x2", launch_flash_mma,
     false, 80, "flash"},
    {"cublas_materialised_S", "cuBLAS batched GEMM -> S in memory, lesson 04 softmax, batched GEMM", launch_library,
     true, 0, "flash"},
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
  Problem p = shape.second;
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
    if (part == Part::tile) {  // the whole output, in float64 on the CPU
      ref = reference(to_floats(q.download()), to_floats(k.download()), to_floats(v.download()), p);
      rows.resize(static_cast<std::size_t>(p.rows()));
      for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
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
  const kl::Trial trial{proto, [&] { o.poison(); }, [&] { return max_error(o.download(), ref, rows, p.dim); }, kRel};
  return kl::run_steps(pc, trial, [&](const Step& st, cudaStream_t s) { run_step(st, p, ws, s); });
}

}  // namespace lesson07
