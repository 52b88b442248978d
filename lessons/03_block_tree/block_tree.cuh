// Lesson 03 — block tree: the sum of n floats, one block at a time. Steps 1-7 climb the classic
// shared-memory tree; steps 8-9 use the register -> warp shuffle -> shared memory -> block
// hierarchy and finish in two launches or in one. Steps 8-9 are one template over the operation,
// so max, min, mean and the L2 norm come from the same code as the sum.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/block.cuh"
#include "common/device.cuh"
#include "common/reduce_lesson.cuh"
#include "common/warp.cuh"

namespace lesson03 {

constexpr int kBlock = 256;  // threads per block in every step
constexpr int kLoads = 4;    // float4 loads in flight per thread per iteration (steps 8-9)

// ---- steps 1-3: one element per thread, a tree in shared memory --------------------------------
// Every block writes the sum of its elements to partial[blockIdx.x]; the launcher repeats the
// kernel on the partials until one block is left (see reduce_in_passes below).

// Step 1: interleaved addressing. In round `stride` the threads whose index is a multiple of
// 2*stride add their neighbour: active threads are scattered over every warp (divergence), and % is slow.
__global__ void reduce_interleaved_divergent(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
    if (tid % (2 * stride) == 0) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// Step 2: the same pairs, but thread t handles pair t (index = 2*stride*t): active threads are now
// packed into the first warps, so whole warps retire. Faster, but the stride between the lanes'
// addresses is 2*stride words: 2-way, 4-way, ... shared-memory bank conflicts.
__global__ void reduce_interleaved_strided(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
    const unsigned index = 2 * stride * tid;
    if (index < blockDim.x) s[index] += s[index + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// Step 3: sequential addressing. Thread t adds s[t + half] into s[t]: the 32 lanes of a warp read 32
// consecutive words, one per bank, so no conflicts, and the active threads stay packed.
__global__ void reduce_sequential(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// ---- steps 4-6: two elements per thread ----------------------------------------------------------

// Step 4: first add during the global load. Half the threads of step 3 were idle from round one;
// now each thread loads two elements (blockDim.x apart) and adds them: half the blocks, same tree.
__global__ void reduce_first_add_on_load(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * (2 * std::size_t{blockDim.x}) + tid;
  float v = i < n ? x[i] : 0.f;
  if (i + blockDim.x < n) v += x[i + blockDim.x];
  s[tid] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// Step 5: unrolled last warp. Once 64 values are left, warp 0 finishes alone: no __syncthreads and
// no half-idle shared-memory rounds, just 5 shuffles in registers (lesson 02's warp reduce). The
// classic version used a volatile shared pointer without any sync: a data race since Volta.
__global__ void reduce_unrolled_last_warp(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * (2 * std::size_t{blockDim.x}) + tid;
  float v = i < n ? x[i] : 0.f;
  if (i + blockDim.x < n) v += x[i + blockDim.x];
  s[tid] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 32; half /= 2) {
    if (tid < half) s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid < 32) {
    v = kl::warp_reduce(s[tid] + s[tid + 32]);
    if (tid == 0) partial[blockIdx.x] = v;
  }
}

// The tree of step 5 with the block size known at compile time: the loop unrolls into straight-line
// rounds and the compiler drops the tests it can decide. The block's sum ends in thread 0.
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

// Step 6: fully unrolled by a template block size. Step 5 with kThreads a template parameter: no
// loop counter, no runtime blockDim.x, fewer instructions per round.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) reduce_unrolled(const float* x, std::size_t n, float* partial) {
  const std::size_t i = blockIdx.x * (2 * std::size_t{kThreads}) + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  if (i + kThreads < n) v += x[i + kThreads];
  v = unrolled_tree<kThreads>(v);
  if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

// ---- 16-byte loads of a float array that may start anywhere --------------------------------------

// x = head (0-3 floats up to the first 16-byte boundary) + body (n4 float4s) + tail (0-3 floats).
struct Split {
  std::size_t head, n4, tail;
  __host__ __device__ Split(const float* x, std::size_t n) {
    const std::size_t misaligned = (reinterpret_cast<std::uintptr_t>(x) / sizeof(float)) % 4;
    head = misaligned ? 4 - misaligned : 0;
    if (head > n) head = n;
    n4 = (n - head) / 4;
    tail = n - head - 4 * n4;
  }
  __host__ __device__ const float4* body(const float* x) const { return reinterpret_cast<const float4*>(x + head); }
  // The i-th of the head + tail scalars (i < head + tail), as an index into x.
  __host__ __device__ std::size_t edge(std::size_t i) const { return i < head ? i : head + 4 * n4 + (i - head); }
};

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
__device__ __forceinline__ float edge_value(const float* x, const Split& sp) {
  const std::size_t t = threadIdx.x;
  return blockIdx.x == 0 && t < sp.head + sp.tail ? T::pre(x[sp.edge(t)]) : Op::identity();
}

// Step 7: many elements per thread. A grid that fills the GPU once; each thread strides through the
// array a float4 (16 bytes) at a time, adding in a register, and only then runs step 6's tree: the
// tree is paid once per thread instead of once per 2 elements, and each load moves 4x the bytes.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) reduce_many_per_thread(const float* x, std::size_t n, float* partial) {
  const Split sp(x, n);
  const float4* body = sp.body(x);
  float v = edge_value<kl::SumOp, Identity>(x, sp);
  const std::size_t stride = std::size_t{gridDim.x} * kThreads;
  for (std::size_t i = blockIdx.x * std::size_t{kThreads} + threadIdx.x; i < sp.n4; i += stride)
    v = combine4<kl::SumOp, Identity>(v, body[i]);
  v = unrolled_tree<kThreads>(v);
  if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

// ---- steps 8-9: registers -> warp shuffle -> shared memory -> block ------------------------------

// Level 1, registers: the block takes tiles of kThreads * kLoads float4s (grid-stride over tiles);
// each thread issues its kLoads 16-byte loads back to back, so they are all in flight at once, into
// independent accumulators. A load past the end is skipped, so any n works.
template <int kThreads, class Op, class T>
__device__ __forceinline__ float thread_partial(const float* x, std::size_t n) {
  const Split sp(x, n);
  const float4* body = sp.body(x);
  float acc[kLoads];
#pragma unroll
  for (int u = 0; u < kLoads; ++u) acc[u] = Op::identity();
  acc[0] = edge_value<Op, T>(x, sp);
  constexpr std::size_t kTile = std::size_t{kThreads} * kLoads;
  for (std::size_t tile = blockIdx.x * kTile; tile < sp.n4; tile += gridDim.x * kTile) {
    float4 q[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const std::size_t i = tile + u * kThreads + threadIdx.x;
      q[u] = i < sp.n4 ? body[i] : float4{};
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (tile + u * kThreads + threadIdx.x < sp.n4) acc[u] = combine4<Op, T>(acc[u], q[u]);
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
__global__ void __launch_bounds__(kThreads) reduce_partials(const float* partial, unsigned count, std::size_t n,
                                                             float* out) {
  const float v = combine_partials<kThreads, Op>(partial, count);
  if (threadIdx.x == 0) *out = T::post(v, n);
}

// Step 9: single pass. The last block to finish reduces the partials, so the second launch (and its
// launch gap, a large part of the time at small n) is gone. Protocol: publish the partial, fence,
// take a ticket; the block holding the last ticket sees every partial and resets the counter to 0
// for the next launch. The order of the final sum is fixed (by index), so the result is deterministic.
template <int kThreads, class Op, class T>
__global__ void __launch_bounds__(kThreads) reduce_single_pass(const float* x, std::size_t n, float* out,
                                                               float* partial, unsigned* arrived) {
  __shared__ bool last;
  const float v = kl::block_allreduce<kThreads, Op>(thread_partial<kThreads, Op, T>(x, n));
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = v;
    __threadfence();  // release: our partial is visible to every SM before our ticket is
    last = atomicAdd(arrived, 1u) == gridDim.x - 1;
    if (last) {
      *arrived = 0;     // every other block has taken its ticket: nobody touches the counter again
      __threadfence();  // acquire: the others' partials, published before their tickets, are read after ours
    }
  }
  __syncthreads();
  if (!last) return;
  const float r = combine_partials<kThreads, Op>(partial, gridDim.x);
  if (threadIdx.x == 0) *out = T::post(r, n);
}

// ---- launchers: (input, n, output, scratch, stream); enqueue only, so CUDA graphs can capture them --

using kl::Scratch;

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

inline void launch_interleaved_divergent(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_interleaved_divergent, kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}
inline void launch_interleaved_strided(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_interleaved_strided, kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}
inline void launch_sequential(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_sequential, kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}
inline void launch_first_add_on_load(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_first_add_on_load, 2 * kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}
inline void launch_unrolled_last_warp(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_unrolled_last_warp, 2 * kBlock, kNoLimit, kTreeSmem}, x, n, out, scratch, s);
}
inline void launch_unrolled(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  reduce_in_passes({reduce_unrolled<kBlock>, 2 * kBlock, kNoLimit, 0}, x, n, out, scratch, s);
}
// At least one float4 per thread; at most the blocks that fit on the GPU at once.
inline void launch_many_per_thread(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  static const std::size_t full = std::size_t(kl::sm_count()) * blocks_per_sm(reduce_many_per_thread<kBlock>);
  reduce_in_passes({reduce_many_per_thread<kBlock>, 4 * kBlock, full, 0}, x, n, out, scratch, s);
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

template <class Op, class T>
void launch_single_pass(const float* x, std::size_t n, float* out, Scratch& scratch, cudaStream_t s) {
  static const std::size_t full = std::size_t(kl::sm_count()) * blocks_per_sm(reduce_single_pass<kBlock, Op, T>);
  const auto grid = static_cast<unsigned>(grid_for(n, kTileFloats, full));
  float* partial = partials_in(scratch, grid, s);
  auto* arrived = reinterpret_cast<unsigned*>(scratch.data());
  reduce_single_pass<kBlock, Op, T><<<grid, kBlock, 0, s>>>(x, n, out, partial, arrived);
  CUDA_CHECK_LAUNCH();
}

inline constexpr kl::SumStep kSteps[] = {
    {"interleaved_divergent", "smem tree, tid % (2*stride) == 0: divergent warps", launch_interleaved_divergent,
     false, true},
    {"interleaved_strided", "smem tree, index = 2*stride*tid: no divergence, bank conflicts",
     launch_interleaved_strided, false, true},
    {"sequential", "smem tree, s[t] += s[t + half]: no bank conflicts", launch_sequential, false, true},
    {"first_add_on_load", "each thread loads and adds two elements first", launch_first_add_on_load, false, true},
    {"unrolled_last_warp", "last 64 values: warp shuffles, no __syncthreads", launch_unrolled_last_warp, false, true},
    {"unrolled", "block size a template parameter: the tree fully unrolled", launch_unrolled, false, true},
    {"many_per_thread", "grid fills the GPU once; grid-stride float4 loads", launch_many_per_thread, false, true},
    {"two_pass", "4 float4 loads in flight, warp->block reduce, 2nd kernel", launch_two_pass<kl::SumOp, Identity>,
     false, true},
    {"single_pass", "as two_pass; the last block reduces the partials", launch_single_pass<kl::SumOp, Identity>, false,
     true},
    {"cub", "cub::DeviceReduce::Sum", kl::launch_cub_sum, true, true},
};

// ---- the same template, other operations ---------------------------------------------------------

// How close a result of the template must be to the float64 reference: max and min exactly; the L2
// norm and the mean within the bound of a float sum of n terms (sum_tolerance), relative to their scale.
inline bool op_close(float got, double ref, double tol) {
  if (!std::isfinite(ref) || !std::isfinite(got)) return kl::scaled_error(got, ref, 1.0) == 0;
  return std::fabs(got - ref) <= tol;
}

struct OpCase {
  const char* name;
  kl::SumLauncher launch;
  double ref, tol;
};

// max, L2 norm and mean of x against their references (for --n's data and the tests).
inline std::vector<OpCase> op_cases(const std::vector<float>& x, kl::SumLauncher max, kl::SumLauncher l2,
                                    kl::SumLauncher mean) {
  const std::size_t n = x.size();
  const kl::SumRef sum = kl::ref_sum(x.data(), n);
  const double eps = std::numeric_limits<float>::epsilon();
  const double norm = kl::ref_l2_norm(x.data(), n), avg = kl::ref_mean(x.data(), n);
  return {{"max", max, kl::ref_max(x.data(), n), 0.0},
          {"l2_norm", l2, norm, norm * (kl::sum_tolerance(n, 1.0) + eps)},
          {"mean", mean, avg, (n ? kl::sum_tolerance(n, sum.abs_sum) / n : 0.0) + std::fabs(avg) * eps}};
}

// The driver's extra rows (main.cu): max, L2 norm and mean through step 9's template, each checked
// against its float64 reference, then timed like the steps.
inline std::vector<kl::Row> other_operations(std::size_t n, kl::Timer& timer, int reps) {
  const std::vector<float> host = kl::uniform_floats(n, -1.0, 1.0, kl::seed_for(n));
  const kl::DeviceBuffer<float> x(host);
  kl::DeviceBuffer<float> out(1);
  Scratch scratch;
  std::vector<kl::Row> rows;
  for (const OpCase& c : op_cases(host, launch_single_pass<kl::MaxOp, Identity>,
                                  launch_single_pass<kl::SumOp, SquareThenSqrt>,
                                  launch_single_pass<kl::SumOp, DivideByCount>)) {
    auto launch = [&](cudaStream_t s) { c.launch(x.data(), n, out.data(), scratch, s); };
    kl::Row row{"op", std::string("single_pass ") + c.name, "f32", "n=" + std::to_string(n)};
    row.bytes = 4.0 * n;
    out.poison();
    launch(timer.stream());
    CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
    const float got = out.download(1)[0];
    row.err = kl::scaled_error(got, c.ref, std::fabs(c.ref));
    row.ok = op_close(got, c.ref, c.tol);
    kl::time_if_ok(timer, row, launch, kl::TimingOptions{reps});
    rows.push_back(row);
  }
  return rows;
}

// The lesson as the shared driver (common/reduce_lesson.cuh) and checks (common/sum_checks.hpp) see it.
inline const kl::SumLesson kLesson{"03", "block tree", kSteps, static_cast<int>(std::size(kSteps)), other_operations};

}  // namespace lesson03
