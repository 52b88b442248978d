// Lesson 03, step 8: registers -> warp shuffle -> shared memory -> block, with kLoads loads in flight
// per thread; a second kernel reduces the block partials. One template over the operation.
#pragma once
#include <cstddef>

#include "common/block.cuh"
#include "lessons/03_block_tree/parts.cuh"

namespace lesson03 {

constexpr int kLoads = 4;  // float4 loads in flight per thread per iteration (steps 8-9)

// Level 1, registers: the block takes tiles of kThreads * kLoads float4s (grid-stride over tiles);
// each thread issues its kLoads 16-byte loads back to back, so they are all in flight at once, into
// independent accumulators. A load past the end is skipped, so any n works.
template <int kThreads, class Op, class T>
__device__ __forceinline__ float thread_partial(const float* x, std::size_t n) {
  const Float4Split sp(x, n);
  const float4* body = reinterpret_cast<const float4*>(sp.body(x));
  float acc[kLoads];
#pragma unroll
  for (int u = 0; u < kLoads; ++u) acc[u] = Op::identity();
  acc[0] = edge_value<Op, T>(x, sp);
  constexpr std::size_t kTile = std::size_t{kThreads} * kLoads;
  for (std::size_t tile = blockIdx.x * kTile; tile < sp.packs; tile += gridDim.x * kTile) {
    float4 q[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const std::size_t i = tile + u * kThreads + threadIdx.x;
      q[u] = i < sp.packs ? body[i] : float4{};
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (tile + u * kThreads + threadIdx.x < sp.packs) acc[u] = combine4<Op, T>(acc[u], q[u]);
  }
#pragma unroll
  for (int u = 1; u < kLoads; ++u) acc[0] = Op::combine(acc[0], acc[u]);
  return acc[0];
}

// Levels 2-4, warp -> shared memory -> block: kl::block_allreduce (common/block.cuh), shown in the
// README: a shuffle reduce per warp, one shared-memory slot per warp, the first warp reduces the slots.

// One block combines `count` partials. __ldcg reads through L2: the partials were written by other
// SMs, and an SM's L1 is not kept coherent with them.
template <int kThreads, class Op>
__device__ __forceinline__ float combine_partials(const float* partial, unsigned count) {
  float v = Op::identity();
  for (unsigned i = threadIdx.x; i < count; i += kThreads) v = Op::combine(v, __ldcg(partial + i));
  return kl::block_allreduce<kThreads, Op>(v);
}

// Step 8, first kernel: the hierarchy instead of the shared-memory tree, and kLoads loads in flight
// per thread instead of one: the loop is limited by DRAM, not by the latency of one load at a time.
template <int kThreads, class Op, class T>
__global__ void __launch_bounds__(kThreads) reduce_two_pass(const float* x, std::size_t n, float* partial) {
  const float v = kl::block_allreduce<kThreads, Op>(thread_partial<kThreads, Op, T>(x, n));
  if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

// Step 8, second kernel: one block reduces the block partials and applies post (sqrt, / n).
template <int kThreads, class Op, class T>
__global__ void __launch_bounds__(kThreads)
    reduce_partials(const float* partial, unsigned count, std::size_t n, float* out) {
  const float v = combine_partials<kThreads, Op>(partial, count);
  if (threadIdx.x == 0) *out = T::post(v, n);
}

// Steps 8-9: at least one tile per block, at most the blocks that fit on the GPU at once
// (persistent: each block loops over its tiles; no block waits for a free SM).
constexpr std::size_t kTileFloats = 4 * std::size_t{kBlock} * kLoads;

template <class Op, class T>
void launch_two_pass(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  static const std::size_t full = std::size_t(kl::sm_count()) * blocks_per_sm(reduce_two_pass<kBlock, Op, T>);
  const auto grid = static_cast<unsigned>(grid_for(n, kTileFloats, full));
  float* partial = partials_in(scratch, grid, s);
  reduce_two_pass<kBlock, Op, T><<<grid, kBlock, 0, s>>>(x, n, partial);
  CUDA_CHECK_LAUNCH();
  reduce_partials<kBlock, Op, T><<<1, kBlock, 0, s>>>(partial, grid, n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson03
