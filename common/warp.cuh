// Warp-level reductions with shuffles (introduced in lesson 02, used by every lesson after it).
// The butterfly (__shfl_xor_sync) leaves the result in all 32 lanes, which softmax needs: every
// lane divides by the same row sum without another broadcast.
#pragma once
#include <cmath>

#include "common/softmax_math.cuh"

namespace kl {

constexpr unsigned kFullMask = 0xffffffffu;

// The operations a reduction template can take: an identity element and a combine.
struct SumOp {
  static __device__ __forceinline__ float identity() { return 0.f; }
  static __device__ __forceinline__ float combine(float a, float b) { return a + b; }
};
struct MaxOp {  // fmaxf drops a NaN operand; the NaN-propagating form keeps "NaN in, NaN out"
  static __device__ __forceinline__ float identity() { return -INFINITY; }
  static __device__ __forceinline__ float combine(float a, float b) { return max_nan(a, b); }
};
struct MinOp {
  static __device__ __forceinline__ float identity() { return INFINITY; }
  static __device__ __forceinline__ float combine(float a, float b) { return (a != a || a < b) ? a : b; }
};

// Butterfly all-reduce: after log2(32) = 5 exchanges every lane holds the warp's result (or, with
// `width` a smaller power of two, each aligned group of `width` lanes its group's: offsets stay below it).
template <class Op = SumOp>
__device__ __forceinline__ float warp_allreduce(float v, int width = 32) {
  for (int offset = width / 2; offset > 0; offset /= 2) v = Op::combine(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Tree reduce toward lane 0: only lane 0's result is the warp's (the other lanes hold partials).
template <class Op = SumOp>
__device__ __forceinline__ float warp_reduce(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = Op::combine(v, __shfl_down_sync(kFullMask, v, offset));
  return v;
}

}  // namespace kl
