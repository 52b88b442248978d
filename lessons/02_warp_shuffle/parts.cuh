// What the steps of lesson 02 share: the launch (every step launches the same way), lesson 01's
// grid-stride loop (steps 2-3), the pieces of the 16-byte loads (step 4 introduces them), and the
// kUnroll loads in flight (step 5 introduces them; step 6 reuses them).
#pragma once
#include <cstddef>

#include "common/device.cuh"
#include "common/pack.cuh"
#include "common/warp.cuh"
#include "lessons/02_warp_shuffle/problem.cuh"

namespace lesson02 {

using kl::Scratch;

constexpr int kBlock = 256;      // threads per block
constexpr int kBlocksPerSm = 8;  // 8 x 256 = 2048 threads, all an SM can hold
constexpr int kUnroll = 4;       // float4 loads in flight per thread in steps 5 and 6
// Steps 5 and 6: with kUnroll loads in flight a thread, 4 blocks (1024 threads) per SM keep twice step
// 4's bytes in flight, and half the warps end in an atomicAdd to the one result (NOTES.md, on the H200).
constexpr int kUnrolledBlocksPerSm = 4;

// per_sm blocks on every SM, but never more than there are floats to give them (each thread takes
// at least per_thread), and at least one, so that n = 0 is still a valid launch.
inline unsigned blocks_for(std::size_t n, std::size_t per_thread, int sms, int per_sm = kBlocksPerSm) {
  const std::size_t needed = (n + kBlock * per_thread - 1) / (kBlock * per_thread);
  const std::size_t full = std::size_t(sms) * per_sm;
  return static_cast<unsigned>(needed < full ? (needed > 0 ? needed : 1) : full);
}

// Every step of this lesson launches the same way: zero the result (the atomics add into it, and
// the memset keeps the launch capturable in a CUDA graph), then one grid that fills the GPU.
template <void (*kKernel)(const float*, std::size_t, float*), std::size_t kPerThread, int kPerSm = kBlocksPerSm>
void launch(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));
  kKernel<<<blocks_for(n, kPerThread, kl::sm_count(), kPerSm), kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

// Each thread's grid-stride partial sum, as in lesson 01's steps 3 and 4: one 4-byte load per trip.
__device__ __forceinline__ float grid_stride_partial(const float* x, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float s = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) s += x[i];
  return s;
}

// x seen as float4 (kl::PackSplit): head scalars up to the first 16-byte boundary (x need not be
// aligned), then aligned float4s, then tail scalars (n need not be a multiple of 4). head, tail < 4.
using Float4Split = kl::PackSplit<4, float, std::size_t>;

// The at most 3 + 3 scalars outside the float4 middle, taken by the grid's first threads.
__device__ __forceinline__ float edge_partial(const float* x, std::size_t n, const Float4Split& sp, std::size_t tid) {
  float s = 0.f;
  if (tid < sp.head) s += x[tid];
  if (tid < sp.tail) s += x[n - sp.tail + tid];
  return s;
}

__device__ __forceinline__ float sum4(float4 q) { return (q.x + q.y) + (q.z + q.w); }

// Step 5 (the loads): kUnroll float4 loads, a grid-stride apart (each still coalesced across the
// warp), issued before any of them is added, into independent accumulators. A thread now waits
// for one memory latency per kUnroll loads instead of per load (Little's law: ~2 MB in flight).
template <int kUnroll>
__device__ __forceinline__ float float4_unrolled_partial(const float* x, std::size_t n) {
  const Float4Split sp(x, n);
  const float4* vec = reinterpret_cast<const float4*>(sp.body(x));
  const std::size_t tid = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float acc[kUnroll] = {};
  std::size_t i = tid;
  for (; i + (kUnroll - 1) * stride < sp.packs; i += kUnroll * stride) {
    float4 q[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) q[k] = vec[i + k * stride];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) acc[k] += sum4(q[k]);
  }
  for (; i < sp.packs; i += stride) acc[0] += sum4(vec[i]);  // fewer than kUnroll float4 left
  float s = edge_partial(x, n, sp, tid);
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) s += acc[k];
  return s;
}

}  // namespace lesson02
