// Lesson 03, step 7: a grid that fills the GPU once; each thread adds many float4s before step 6's
// tree (unrolled_tree, in parts.cuh).
#pragma once
#include <cstddef>

#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

// Step 7: many elements per thread. A grid that fills the GPU once; each thread strides through the
// array a float4 (16 bytes) at a time, adding in a register, and only then runs step 6's tree: the
// tree is paid once per thread instead of once per 2 elements, and each load moves 4x the bytes.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) reduce_many_per_thread(const float* x, std::size_t n, float* partial) {
  const Float4Split sp(x, n);
  const float4* body = reinterpret_cast<const float4*>(sp.body(x));
  float v = edge_value<kl::SumOp, Identity>(x, sp);
  const std::size_t stride = std::size_t{gridDim.x} * kThreads;
  for (std::size_t i = blockIdx.x * std::size_t{kThreads} + threadIdx.x; i < sp.packs; i += stride)
    v = combine4<kl::SumOp, Identity>(v, body[i]);
  v = unrolled_tree<kThreads>(v);
  if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

// At least one float4 per thread; at most the blocks that fit on the GPU at once.
inline void launch_many_per_thread(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  static const std::size_t full = std::size_t(kl::sm_count()) * blocks_per_sm(reduce_many_per_thread<kBlock>);
  reduce_in_passes({reduce_many_per_thread<kBlock>, 4 * kBlock, full, 0}, x, n, out, scratch, s);
}

}  // namespace lesson03
