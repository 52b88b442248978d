// Step 5: online softmax. Steps 3 and 4 find a row's max, then its sum: two passes (three reads of
// the row without a cache). A running (max, sum), rescaled whenever the max grows (kl::combine in
// common/softmax_math.cuh), gives both in one pass at any row length.
#pragma once
#include <algorithm>
#include <cstdint>

#include "lessons/04_online_softmax/parts.cuh"

namespace lesson04 {

// The (max, sum) of a few values held by one thread.
template <int N>
__device__ __forceinline__ kl::MaxSum pack_stats(const float (&v)[N]) {
  float m = v[0];
#pragma unroll
  for (int i = 1; i < N; ++i) m = kl::max_nan(m, v[i]);
  if (m == -INFINITY) return {m, 0.f};
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += kl::exp_ftz(v[i] - m);
  return {m, s};
}

// Every thread of the block ends with the (max, sum) of the whole row: a butterfly of combines in
// each warp, then each thread combines the warps' results from shared memory.
template <int kThreads>
__device__ kl::MaxSum block_allreduce_maxsum(kl::MaxSum a) {
  constexpr int kWarps = kThreads / 32;
  __shared__ kl::MaxSum per_warp[kWarps];
  for (int offset = 16; offset > 0; offset /= 2)
    a = kl::combine(a, {__shfl_xor_sync(kl::kFullMask, a.m, offset), __shfl_xor_sync(kl::kFullMask, a.s, offset)});
  if (threadIdx.x % 32 == 0) per_warp[threadIdx.x / 32] = a;
  __syncthreads();
  kl::MaxSum total{-INFINITY, 0.f};
  for (int w = 0; w < kWarps; ++w) total = kl::combine(total, per_warp[w]);
  __syncthreads();  // per_warp is reused by the next row only after every thread has read it
  return total;
}

// Step 5: step 4 with the max and sum passes fused: each thread keeps a running (max, sum) and
// rescales its sum whenever the max grows (the combine rule), so the row is read twice, not three
// times. Works at any K.
template <class T, int Pack, int kThreads>
__global__ void __launch_bounds__(kThreads, kFullSmThreads / kThreads)
    softmax_online(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows, int cols, float scale) {
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const RowPacks<Pack> r(xr, cols);
    kl::MaxSum acc{-INFINITY, 0.f};
    for_my_packs<Pack, kThreads>(r, [&](int c, auto pack) {
      constexpr int N = decltype(pack)::value;
      float v[N];
      kl::load_pack<N>(xr + c, v);
      scale_all(v, scale);
      acc = kl::combine(acc, pack_stats(v));
    });
    acc = block_allreduce_maxsum<kThreads>(acc);
    const float inv = 1.f / acc.s;
    store_probs<Pack, kThreads>(xr, yr, r, scale, acc.m, inv);
  }
}

// One launch of step 5 for element type T and packs of Pack elements.
template <class T, int Pack>
void launch_online_t(const Problem& p, cudaStream_t s) {
  const auto kernel = softmax_online<T, Pack, kUncachedThreads>;
  kernel<<<uncached_grid(kernel, p.rows), kUncachedThreads, 0, s>>>(static_cast<const T*>(p.x), static_cast<T*>(p.y),
                                                                    p.rows, static_cast<int>(p.cols), p.scale);
  CUDA_CHECK_LAUNCH();
}

inline void launch_online(const Problem& p, Workspace&, cudaStream_t s) {
  for_block_kernels(p, [&](auto t, auto pack) { launch_online_t<decltype(t), decltype(pack)::value>(p, s); });
}

}  // namespace lesson04
