// Lesson 02, step 5: kUnroll float4 loads in flight per thread instead of one.
#pragma once
#include <cstddef>

#include "lessons/02_warp_shuffle/parts.cuh"

namespace lesson02 {

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

// Step 5: step 4 with kUnroll loads in flight per thread.
template <int kUnroll>
__global__ void sum_float4_unrolled(const float* x, std::size_t n, float* out) {
  const float s = kl::warp_reduce(float4_unrolled_partial<kUnroll>(x, n));
  if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

inline constexpr kl::SumLauncher launch_float4_unrolled = launch<sum_float4_unrolled<kUnroll>, 4 * kUnroll>;

}  // namespace lesson02
