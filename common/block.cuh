// Block-level reductions built from warp shuffles (lesson 03's hierarchy: registers -> warp shuffle
// -> one shared-memory slot per warp -> the first warp, or every thread). Used by lesson 03 onward.
#pragma once
#include "common/warp.cuh"

namespace kl {

// All threads of the block call it with their value; every thread gets the block's result.
// kThreads must be a multiple of 32 and the block size. Ends with a barrier, so it can be called
// again right away (e.g. max, then sum, in softmax).
template <int kThreads, class Op = SumOp>
__device__ __forceinline__ float block_allreduce(float v) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block size must be a multiple of 32, at most 1024");
  constexpr int kWarps = kThreads / 32;
  __shared__ float warp_result[kWarps];
  __shared__ float block_result;
  v = warp_reduce<Op>(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_result[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? warp_result[lane] : Op::identity();
    v = warp_reduce<Op>(v);
    if (lane == 0) block_result = v;
  }
  __syncthreads();
  v = block_result;
  __syncthreads();  // nobody may overwrite warp_result/block_result before all have read
  return v;
}

// The same allreduce with one barrier (blockDim.x must be kThreads): each warp's partial goes to
// scratch[warp], and after the barrier every thread combines all of them itself. scratch must not be
// written again until every thread has passed one more __syncthreads(): a caller reducing twice in a
// row alternates two arrays (lesson 04, step 3).
template <int kThreads, class Op = SumOp>
__device__ __forceinline__ float block_allreduce_one_barrier(float v, float (&scratch)[kThreads / 32]) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block size must be a multiple of 32, at most 1024");
  v = warp_reduce<Op>(v);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) v = Op::combine(v, scratch[w]);
  return v;
}

}  // namespace kl
