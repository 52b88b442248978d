// Lesson 02 — warp shuffle: the sum of n floats again, from lesson 01's best step to the copy
// bandwidth. The warp adds through registers (shuffles), loads grow to 16 bytes, and each thread
// keeps several loads in flight. Every step has lesson 01's launcher signature, so main.cu and
// test.cu walk one table of steps.
#pragma once
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include <cstddef>
#include <cstdint>

#include "common/device.cuh"
#include "common/reduce_lesson.cuh"
#include "common/warp.cuh"
#include "lessons/01_naive_reduction/reduce.cuh"  // step 1 is lesson 01's launch_block_atomic

namespace lesson02 {

namespace cg = cooperative_groups;

constexpr int kBlock = 256;      // threads per block
constexpr int kBlocksPerSm = 8;  // 8 x 256 = 2048 threads, all an SM can hold
constexpr int kUnroll = 4;       // float4 loads in flight per thread in steps 5 and 6

// Each thread's grid-stride partial sum, as in lesson 01's steps 3 and 4: one 4-byte load per trip.
__device__ __forceinline__ float grid_stride_partial(const float* x, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float s = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) s += x[i];
  return s;
}

// Step 2: the block's shared-memory tree (8 rounds, 8 __syncthreads, idle threads) becomes a warp
// reduce in registers: 5 __shfl_down_sync, no shared memory, no barrier; lane 0 makes one atomic per warp.
__global__ void sum_warp_shuffle_down(const float* x, std::size_t n, float* out) {
  const float s = kl::warp_reduce(grid_stride_partial(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

// Step 3: the __shfl_xor_sync butterfly, also 5 shuffles, so no faster; but every lane ends with the
// warp's sum, which softmax (lesson 04) needs: each lane divides its own values by the row sum.
__global__ void sum_warp_butterfly(const float* x, std::size_t n, float* out) {
  const float s = kl::warp_allreduce(grid_stride_partial(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

// x seen as float4: head scalars up to the first 16-byte boundary (x need not be aligned), then
// nvec aligned float4, then tail scalars (n need not be a multiple of 4). head, tail < 4.
struct Float4View {
  const float4* vec;
  std::size_t head, nvec, tail;
};

__host__ __device__ inline Float4View float4_view(const float* x, std::size_t n) {
  const std::size_t past_boundary = (reinterpret_cast<std::uintptr_t>(x) / sizeof(float)) % 4;
  const std::size_t head = past_boundary == 0 ? 0 : (4 - past_boundary < n ? 4 - past_boundary : n);
  const std::size_t nvec = (n - head) / 4;
  return {reinterpret_cast<const float4*>(x + head), head, nvec, n - head - 4 * nvec};
}

// The at most 3 + 3 scalars outside the float4 middle, taken by the grid's first threads.
__device__ __forceinline__ float edge_partial(const float* x, std::size_t n, const Float4View& v, std::size_t tid) {
  float s = 0.f;
  if (tid < v.head) s += x[tid];
  if (tid < v.tail) s += x[n - v.tail + tid];
  return s;
}

__device__ __forceinline__ float sum4(float4 q) { return (q.x + q.y) + (q.z + q.w); }

// Step 4 (the loads): one 16-byte float4 per trip instead of one float. A warp's load instruction
// now fetches 512 bytes, not 128: 4x fewer instructions and 4x the bytes in flight per thread.
__device__ __forceinline__ float float4_partial(const float* x, std::size_t n) {
  const Float4View v = float4_view(x, n);
  const std::size_t tid = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float s = edge_partial(x, n, v, tid);
  for (std::size_t i = tid; i < v.nvec; i += stride) s += sum4(v.vec[i]);
  return s;
}

// Step 4: step 2 with float4 loads.
__global__ void sum_float4(const float* x, std::size_t n, float* out) {
  const float s = kl::warp_reduce(float4_partial(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

// Step 5 (the loads): kUnroll float4 loads, a grid-stride apart (each still coalesced across the
// warp), issued before any of them is added, into independent accumulators. A thread now waits
// for one memory latency per kUnroll loads instead of per load (Little's law: ~2 MB in flight).
template <int kUnroll>
__device__ __forceinline__ float float4_unrolled_partial(const float* x, std::size_t n) {
  const Float4View v = float4_view(x, n);
  const std::size_t tid = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float acc[kUnroll] = {};
  std::size_t i = tid;
  for (; i + (kUnroll - 1) * stride < v.nvec; i += kUnroll * stride) {
    float4 q[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) q[k] = v.vec[i + k * stride];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) acc[k] += sum4(q[k]);
  }
  for (; i < v.nvec; i += stride) acc[0] += sum4(v.vec[i]);  // fewer than kUnroll float4 left
  float s = edge_partial(x, n, v, tid);
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) s += acc[k];
  return s;
}

// Step 5: step 4 with kUnroll loads in flight per thread.
template <int kUnroll>
__global__ void sum_float4_unrolled(const float* x, std::size_t n, float* out) {
  const float s = kl::warp_reduce(float4_unrolled_partial<kUnroll>(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

// Step 6: step 5 with the warp sum from the library: cooperative_groups::reduce on a 32-thread
// tile. Not faster: for floats it compiles to step 3's 5 butterfly shuffles (every lane gets the sum).
template <int kUnroll>
__global__ void sum_cg_reduce(const float* x, std::size_t n, float* out) {
  const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
  const float s = cg::reduce(warp, float4_unrolled_partial<kUnroll>(x, n), cg::plus<float>());
  if (warp.thread_rank() == 0) atomicAdd(out, s);
}

// ---- launchers: (input, n, output, scratch for libraries, stream) --------------------------------

using kl::Scratch;

// Enough blocks to fill every SM, but never more than there are floats to give them (each thread
// takes at least per_thread), and at least one, so that n = 0 is still a valid launch.
inline unsigned blocks_for(std::size_t n, std::size_t per_thread, int sms) {
  const std::size_t needed = (n + kBlock * per_thread - 1) / (kBlock * per_thread);
  const std::size_t full = std::size_t(sms) * kBlocksPerSm;
  return static_cast<unsigned>(needed < full ? (needed > 0 ? needed : 1) : full);
}

// Every step of this lesson launches the same way: zero the result (the atomics add into it, and
// the memset keeps the launch capturable in a CUDA graph), then one grid that fills the GPU.
template <void (*kKernel)(const float*, std::size_t, float*), std::size_t kPerThread>
void launch(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));
  kKernel<<<blocks_for(n, kPerThread, kl::sm_count()), kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

inline constexpr kl::SumStep kSteps[] = {
    {"block_atomic", "lesson 01's best: shared-memory block tree, one atomicAdd per block",
     lesson01::launch_block_atomic, false, false},
    {"warp_shuffle_down", "grid-stride partials, __shfl_down_sync warp sum, one atomicAdd per warp",
     launch<sum_warp_shuffle_down, 1>, false, false},
    {"warp_butterfly", "as 2 with the __shfl_xor_sync butterfly: every lane holds the sum",
     launch<sum_warp_butterfly, 1>, false, false},
    {"float4", "as 2 with 16-byte float4 loads (scalar head and tail)", launch<sum_float4, 4>, false, false},
    {"float4_unrolled", "as 4 with 4 independent float4 loads in flight per thread",
     launch<sum_float4_unrolled<kUnroll>, 4 * kUnroll>, false, false},
    {"cg_reduce", "as 5 with cooperative_groups::reduce for the warp sum",
     launch<sum_cg_reduce<kUnroll>, 4 * kUnroll>, false, false},
    {"cub", "cub::DeviceReduce::Sum", kl::launch_cub_sum, true, true},
};

// The lesson as the shared driver (common/reduce_lesson.cuh) and checks (common/sum_checks.hpp) see it.
inline const kl::SumLesson kLesson{"02", "warp shuffle", kSteps, static_cast<int>(std::size(kSteps))};

}  // namespace lesson02
