// Lesson 04, the product: softmax(x * scale) of each row of an [M, K] matrix in f32, f16 or bf16,
// through a dispatcher that picks the fastest step for the row length (lessons 05 and 07 call it).
// Here: which step can run which shape, the dispatcher (step 7), cuDNN (the library baseline), the
// table of steps that main.cu and test.cu walk, and the public API. The steps themselves (kernels and
// launchers) are in steps/, their shared pieces in parts.cuh, the problem in problem.cuh; its
// reference and the run of one shape for the executable, in host.cuh.
//
// The steps, one line each (--list prints them; --step takes the number or the name):
//   1    three_kernels          max, sum of exp, normalise: three kernels, one thread per row
//   2    warp_per_row           a warp per row, the row in registers, 16-byte packs, shuffles
//   3    block_cached           a block per row, the row cached on chip (registers, else shared memory)
//   4    block_uncached         a block per row, three passes over global memory
//   5    online                 a block per row, running (max, sum): two passes over global memory
//   6    cluster                a cluster of CTAs per row, partial (max, sum) via DSMEM (sm_90)
//   7    dispatch               picks step 2, 3, 5 or 6 by row length, dtype and pack
//   lib  cudnn                  cudnnSoftmaxForward (ACCURATE, INSTANCE)
#pragma once
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/check.cuh"
#include "common/step.hpp"
#include "lessons/04_online_softmax/parts.cuh"
#include "lessons/04_online_softmax/steps/01_three_kernels.cuh"
#include "lessons/04_online_softmax/steps/02_warp_per_row.cuh"
#include "lessons/04_online_softmax/steps/03_block_cached.cuh"
#include "lessons/04_online_softmax/steps/04_block_uncached.cuh"
#include "lessons/04_online_softmax/steps/05_online.cuh"
#include "lessons/04_online_softmax/steps/06_cluster.cuh"

namespace lesson04 {

// ---- which step can handle which shape ------------------------------------------------------------

// Shared memory a block may fill with row data: the opt-in limit less a little for the block
// reduction's own (static) shared arrays.
inline std::size_t row_smem_bytes(const DeviceCaps& c) { return c.smem_optin - 1024; }

inline std::string kib(std::int64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

// "" when the step can run the problem on this GPU, else why not (the driver prints it as n/a).
inline std::string always(const Problem&, const DeviceCaps&) { return ""; }

inline std::string warp_support(const Problem& p, const DeviceCaps&) {
  if (p.cols <= kWarpMaxCols) return "";
  return "a row of " + std::to_string(p.cols) + " does not fit in a warp's registers (at most " +
         std::to_string(kWarpMaxCols) + ")";
}

inline std::string cached_support(const Problem& p, const DeviceCaps& caps) {
  const std::int64_t row = p.cols * dtype_bytes(p.dtype);
  if (row <= static_cast<std::int64_t>(row_smem_bytes(caps))) return "";
  return "a row of " + kib(row) + " exceeds a block's shared memory (" + kib(row_smem_bytes(caps)) + ")";
}

inline std::string cluster_support(const Problem& p, const DeviceCaps& caps) {
  const std::int64_t row = p.cols * dtype_bytes(p.dtype);
  if (caps.cc_major < 9)
    return "thread-block clusters need sm_90 (this GPU is sm_" + std::to_string(caps.cc_major) +
           std::to_string(caps.cc_minor) + ")";
  if (row < kClusterMinRowBytes) return "a row of " + kib(row) + " fits one block's shared memory (step 3)";
  const int size = cluster_size(p.cols, dtype_bytes(p.dtype));
  const std::int64_t part = cluster_part(p.cols, size, 8) * dtype_bytes(p.dtype);
  if (part > static_cast<std::int64_t>(row_smem_bytes(caps)))
    return "a row of " + kib(row) + " exceeds " + std::to_string(kClusterMax) + " CTAs' shared memory";
  return "";
}

inline std::string cudnn_support(const Problem& p, const DeviceCaps&) {
#ifdef KL_NO_CUDNN
  (void)p;
  return "built without cuDNN (not found when CMake configured: install libcudnn9-dev-cuda-13 or set CUDNN_ROOT)";
#endif
  if (p.scale != 1.f) return "cuDNN's softmax has no input scale";
  if (p.rows > INT_MAX) return "cuDNN tensor sizes are int";
  return "";
}

// ---- step 7: the dispatcher -----------------------------------------------------------------------

// The dispatcher's thresholds, all of them, per dtype, from the H100 sweep (README § step 7 and
// NOTES.md have the numbers):
//  - registers (step 2) up to 2048 elements with 16-byte packs, up to 1024 with narrower packs;
//  - shared memory (step 3) for f32 rows up to 64 KiB and for 16-bit rows up to 32 KiB (at 64 KiB a
//    cluster is faster in 16-bit types, not in f32);
//  - a cluster (step 6) for longer rows where it can run (sm_90 and its sm_90 code built), the cache
//    if it still fits elsewhere, else step 5.
// Step 4 is never the fastest: step 3 takes every row it could.
struct DispatchLimits {
  std::int64_t warp_cols_wide;    // step 2 up to this K with 16-byte packs
  std::int64_t warp_cols_narrow;  // ... and up to this K with packs of 1 or 2 elements (8 bytes or less)
  std::int64_t cached_bytes;      // then step 3 up to this row size in bytes
};
constexpr DispatchLimits kDispatchF32{2048, 1024, 64 << 10};
constexpr DispatchLimits kDispatch16Bit{2048, 1024, 32 << 10};  // f16 and bf16

static_assert(kDispatchF32.warp_cols_wide <= kWarpMaxCols && kDispatch16Bit.warp_cols_wide <= kWarpMaxCols,
              "step 2 cannot take rows longer than kWarpMaxCols");

inline const DispatchLimits& dispatch_limits(Dtype dtype) {
  return dtype == Dtype::f32 ? kDispatchF32 : kDispatch16Bit;
}

// The step (2 to 6) the dispatcher runs for rows of `cols` elements of `dtype` moved in packs of `pack`.
// `clusters`: whether step 6's kernel can run here at all (chosen_step asks cluster_missing: a build
// without sm_90 code cannot, even on an H100); without it long rows take step 3 or 5.
inline int choose_step(std::int64_t cols, Dtype dtype, int pack, const DeviceCaps& caps, bool clusters = true) {
  const DispatchLimits& lim = dispatch_limits(dtype);
  const bool wide = pack * dtype_bytes(dtype) == 16;
  if (cols <= (wide ? lim.warp_cols_wide : lim.warp_cols_narrow)) return 2;
  const Problem p{nullptr, nullptr, 1, cols, dtype, 1.f};
  const std::int64_t row = cols * dtype_bytes(dtype);
  if (row <= lim.cached_bytes) return 3;
  if (clusters && cluster_support(p, caps).empty()) return 6;
  if (cached_support(p, caps).empty()) return 3;
  return 5;
}

inline int chosen_step(const Problem& p) {
  return choose_step(p.cols, p.dtype, kl::widest_pack(p.x, p.y, p.cols, dtype_bytes(p.dtype)), device_caps(),
                     cluster_missing().empty());
}

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s);  // defined after the table

// ---- the library: cuDNN ---------------------------------------------------------------------------

#ifndef KL_NO_CUDNN
inline void cudnn_check(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_NOT_SUPPORTED) throw NotSupported(std::string(call) + ": CUDNN_STATUS_NOT_SUPPORTED");
  if (status != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: " + cudnnGetErrorString(status));
}

// The rows as an N x C x 1 x 1 tensor (N = M, C = K); INSTANCE mode normalises over C*H*W = K.
inline void launch_cudnn(const Problem& p, Workspace& ws, cudaStream_t s) {
  if (empty(p)) return;
  if (!ws.cudnn) cudnn_check(cudnnCreate(&ws.cudnn), "cudnnCreate");
  cudnn_check(cudnnSetStream(ws.cudnn, s), "cudnnSetStream");
  const cudnnDataType_t type = p.dtype == Dtype::f32   ? CUDNN_DATA_FLOAT
                               : p.dtype == Dtype::f16 ? CUDNN_DATA_HALF
                                                       : CUDNN_DATA_BFLOAT16;
  cudnnTensorDescriptor_t desc;
  cudnn_check(cudnnCreateTensorDescriptor(&desc), "cudnnCreateTensorDescriptor");
  cudnnStatus_t status = cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, type, static_cast<int>(p.rows),
                                                    static_cast<int>(p.cols), 1, 1);
  const float one = 1.f, zero = 0.f;  // y = 1 * softmax(x) + 0 * y
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnSoftmaxForward(ws.cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &one, desc, p.x, &zero,
                                 desc, p.y);
  cudnnDestroyTensorDescriptor(desc);
  cudnn_check(status, "cudnnSoftmaxForward");
}
#else
inline void launch_cudnn(const Problem&, Workspace&, cudaStream_t) { throw NotSupported("built without cuDNN"); }
#endif

// ---- the table of steps ---------------------------------------------------------------------------

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);
using Support = std::string (*)(const Problem& p, const DeviceCaps& caps);

// What the table holds per step: its launcher, and whether it can run a problem on a GPU.
struct Launch {
  Launcher run;
  Support support;  // "" when it can; else why not (the driver shows the step as n/a)
  // Every lesson calls its step the same way: st.launch(...), with the launcher's arguments.
  void operator()(const Problem& p, Workspace& ws, cudaStream_t s) const { run(p, ws, s); }
};

using SoftmaxStep = kl::Step<Launch>;

inline constexpr SoftmaxStep kSteps[] = {
    kl::step("three_kernels", "max, sum of exp, normalise: three kernels, one thread per row",
             Launch{launch_three_kernels, always}),
    kl::step("warp_per_row", "a warp per row, the row in registers, 16-byte packs, shuffles",
             Launch{launch_warp_per_row, warp_support}),
    kl::step("block_cached", "a block per row, the row cached on chip (registers, else shared memory)",
             Launch{launch_block_cached, cached_support}),
    kl::step("block_uncached", "a block per row, three passes over global memory",
             Launch{launch_block_uncached, always}),
    kl::step("online", "a block per row, running (max, sum): two passes over global memory",
             Launch{launch_online, always}),
    kl::step("cluster", "a cluster of CTAs per row, partial (max, sum) via DSMEM (sm_90)",
             Launch{launch_cluster, cluster_support})
        .needs(90),
    kl::step("dispatch", "picks step 2, 3, 5 or 6 by row length, dtype and pack", Launch{launch_dispatch, always}),
    kl::step("cudnn", "cudnnSoftmaxForward (ACCURATE, INSTANCE)", Launch{launch_cudnn, cudnn_support}).library(),
};

inline constexpr int kDispatchStep = 7;

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s) {
  if (empty(p)) return;
  kSteps[chosen_step(p) - 1].launch(p, ws, s);
}

// The public API: softmax(x * scale) of each row of a rows x cols matrix, through the dispatcher.
// Returns without launching anything when rows or cols is 0.
template <class T>
void softmax(const T* x, T* y, std::int64_t rows, std::int64_t cols, Workspace& ws, float scale = 1.f,
             cudaStream_t s = nullptr) {
  if (cols > kMaxCols) throw kl::UsageError("softmax: rows longer than 2^31 - 512 elements are not supported");
  launch_dispatch(Problem{x, y, rows, cols, dtype_of<T>(), scale}, ws, s);
}

// The same with a workspace of its own. Pass one in to capture the call in a CUDA graph: the
// first call for a shape may allocate, and allocation is not allowed during a capture.
template <class T>
void softmax(const T* x, T* y, std::int64_t rows, std::int64_t cols, float scale = 1.f, cudaStream_t s = nullptr) {
  Workspace ws;
  softmax(x, y, rows, cols, ws, scale, s);
}

}  // namespace lesson04
