// What the steps of lesson 03 share: the block size; how steps 1-7 finish (the kernel runs again on
// the block partials until one block is left) and the scratch the partials live in; and the pieces of
// the template over the operation that step 7 introduces and steps 8-9 reuse.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "common/block.cuh"
#include "common/device.cuh"
#include "common/pack.cuh"
#include "common/warp.cuh"
#include "lessons/03_block_tree/problem.cuh"

namespace lesson03 {

using kl::Scratch;

constexpr int kBlock = 256;  // threads per block in every step

// ---- steps 1-7: the partials of every pass -----------------------------------------------------

// Scratch layout of this lesson: [single-pass arrival counter, 16 bytes][block partials...]. The
// counter is zeroed once, when the scratch is allocated (the untimed first run: no memset is ever
// captured), and every single-pass launch leaves it at 0. The other steps never touch those 16
// bytes; a library given the same scratch would (the driver runs CUB last).
constexpr std::size_t kCounterBytes = 16;

inline float* partials_in(Scratch& scratch, std::size_t count, cudaStream_t s) {
  const std::size_t bytes = kCounterBytes + count * sizeof(float);
  if (scratch.size() < bytes) {
    scratch.resize(bytes);
    CUDA_CHECK(cudaMemsetAsync(scratch.data(), 0, kCounterBytes, s));
  }
  return reinterpret_cast<float*>(scratch.data() + kCounterBytes);
}

// One block per `per_block` elements, at least 1 (n = 0 still writes the identity), at most `most`.
inline std::size_t grid_for(std::size_t n, std::size_t per_block, std::size_t most) {
  return std::clamp<std::size_t>((n + per_block - 1) / per_block, 1, most);
}

// Blocks per SM that fit at once (registers, shared memory, threads); asked once per kernel.
template <class Kernel>
int blocks_per_sm(Kernel kernel) {
  int blocks = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kBlock, 0));
  return blocks;
}

// Steps 1-7 finish the same way: each block writes its partial to scratch and the same kernel runs
// again on the partials until one block is left, which writes *out. The grid of every pass:
inline std::vector<std::size_t> pass_grids(std::size_t n, std::size_t per_block, std::size_t most) {
  std::vector<std::size_t> grids;
  do {
    grids.push_back(grid_for(n, per_block, most));
    n = grids.back();
  } while (n > 1);
  return grids;
}

using TreeKernel = void (*)(const float*, std::size_t, float*);

struct TreeStep {
  TreeKernel kernel;
  std::size_t per_block;  // elements one block reduces
  std::size_t most;       // most blocks per launch
  std::size_t smem;       // dynamic shared memory (steps 1-5 size their tree from blockDim.x)
};

inline void reduce_in_passes(const TreeStep& k, const float* x, std::size_t n, float* out, Scratch& scratch,
                             cudaStream_t s) {
  const std::vector<std::size_t> grids = pass_grids(n, k.per_block, k.most);
  float* partial = partials_in(scratch, grids[0] + (grids.size() > 1 ? grids[1] : 0), s);
  float* buf[2] = {partial, partial + grids[0]};  // passes alternate: pass p writes buf[p % 2]
  for (std::size_t p = 0; p < grids.size(); ++p) {
    float* dst = p + 1 == grids.size() ? out : buf[p % 2];
    k.kernel<<<static_cast<unsigned>(grids[p]), kBlock, k.smem, s>>>(x, n, dst);
    CUDA_CHECK_LAUNCH();
    x = dst;
    n = grids[p];
  }
}

constexpr std::size_t kNoLimit = 0x7fffffff;  // the grid's x-dimension limit
constexpr std::size_t kTreeSmem = kBlock * sizeof(float);

// ---- steps 7-9: 16-byte loads and the template over the operation ------------------------------

// x seen as float4 (kl::PackSplit): head (0-3 floats up to the first 16-byte boundary) + body
// (packs float4s) + tail (0-3 floats).
using Float4Split = kl::PackSplit<4, float, std::size_t>;

// What the template applies to each element before combining (pre) and to the result (post).
struct Identity {  // sum, max, min
  static __host__ __device__ float pre(float v) { return v; }
  static __host__ __device__ float post(float r, std::size_t) { return r; }
};
struct SquareThenSqrt {  // L2 norm = sqrt(sum of squares)
  static __host__ __device__ float pre(float v) { return v * v; }
  static __host__ __device__ float post(float r, std::size_t) { return sqrtf(r); }
};
struct DivideByCount {  // mean = sum / n (0/0 = NaN for n = 0, as the reference says)
  static __host__ __device__ float pre(float v) { return v; }
  static __host__ __device__ float post(float r, std::size_t n) { return r / static_cast<float>(n); }
};

template <class Op, class T>
__device__ __forceinline__ float combine4(float acc, float4 q) {
  return Op::combine(acc, Op::combine(Op::combine(T::pre(q.x), T::pre(q.y)), Op::combine(T::pre(q.z), T::pre(q.w))));
}

// The head and tail scalars go to the first threads of block 0; every other thread starts empty.
template <class Op, class T>
__device__ __forceinline__ float edge_value(const float* x, const Float4Split& sp) {
  const std::size_t t = threadIdx.x;
  return blockIdx.x == 0 && t < sp.head + sp.tail ? T::pre(x[sp.edge(t)]) : Op::identity();
}

// Step 6 introduces it, step 7 reuses it: the tree of step 5 with the block size known at compile time: the loop
// unrolls into straight-line rounds and the compiler drops the tests it can decide. The block's sum ends in thread 0.
template <int kThreads>
__device__ __forceinline__ float unrolled_tree(float v) {
  static_assert(kThreads >= 64 && (kThreads & (kThreads - 1)) == 0, "a power of two, at least 64");
  __shared__ float s[kThreads];
  const unsigned tid = threadIdx.x;
  s[tid] = v;
  __syncthreads();
#pragma unroll
  for (unsigned half = kThreads / 2; half > 32; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  return tid < 32 ? kl::warp_reduce(s[tid] + s[tid + 32]) : 0.f;
}

// Step 8 introduces the rest of this file, step 9 reuses it: the registers level (thread_partial) and
// the combine of the block partials.
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

// One block combines `count` partials. __ldcg reads through L2: the partials were written by other
// SMs, and an SM's L1 is not kept coherent with them.
template <int kThreads, class Op>
__device__ __forceinline__ float combine_partials(const float* partial, unsigned count) {
  float v = Op::identity();
  for (unsigned i = threadIdx.x; i < count; i += kThreads) v = Op::combine(v, __ldcg(partial + i));
  return kl::block_allreduce<kThreads, Op>(v);
}

// Steps 8-9: at least one tile per block, at most the blocks that fit on the GPU at once
// (persistent: each block loops over its tiles; no block waits for a free SM).
constexpr std::size_t kTileFloats = 4 * std::size_t{kBlock} * kLoads;

}  // namespace lesson03
