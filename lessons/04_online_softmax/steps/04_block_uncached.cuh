// Step 4: one block per row, no cache, for rows longer than a block's shared memory. kUncachedThreads
// and uncached_grid, which step 5 reuses, are in parts.cuh.
#pragma once
#include <algorithm>
#include <cstdint>

#include "lessons/04_online_softmax/parts.cuh"

namespace lesson04 {

// Step 4: step 3 without the cache, for rows longer than shared memory: the max, sum and store
// passes each read the row from global memory again (L2 catches some of it). Three reads, one write.
template <class T, int Pack, int kThreads>
__global__ void __launch_bounds__(kThreads, kFullSmThreads / kThreads)
    softmax_block_uncached(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows, int cols, float scale) {
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const RowPacks<Pack> r(xr, cols);
    float m = -INFINITY;
    for_my_packs<Pack, kThreads>(r, [&](int c, auto pack) {
      constexpr int N = decltype(pack)::value;
      float v[N];
      kl::load_pack<N>(xr + c, v);
#pragma unroll
      for (int i = 0; i < N; ++i) m = kl::max_nan(m, v[i] * scale);
    });
    m = kl::block_allreduce<kThreads, kl::MaxOp>(m);
    const float s = exp_sum<Pack, kThreads>(xr, r, scale, m);
    const float inv = 1.f / kl::block_allreduce<kThreads>(s);
    store_probs<Pack, kThreads>(xr, yr, r, scale, m, inv);
  }
}

// One launch of step 4 for element type T and packs of Pack elements.
template <class T, int Pack>
void launch_uncached_t(const Problem& p, cudaStream_t s) {
  const auto kernel = softmax_block_uncached<T, Pack, kUncachedThreads>;
  kernel<<<uncached_grid(kernel, p.rows), kUncachedThreads, 0, s>>>(static_cast<const T*>(p.x), static_cast<T*>(p.y),
                                                                    p.rows, static_cast<int>(p.cols), p.scale);
  CUDA_CHECK_LAUNCH();
}

inline void launch_block_uncached(const Problem& p, Workspace&, cudaStream_t s) {
  for_block_kernels(p, [&](auto t, auto pack) { launch_uncached_t<decltype(t), decltype(pack)::value>(p, s); });
}

}  // namespace lesson04
