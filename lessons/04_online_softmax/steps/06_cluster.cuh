// Step 6: a thread-block cluster per row (sm_90). Rows longer than one block's shared memory fall to
// step 5's two reads; the CTAs of a cluster can split such a row, cache a part each, and merge their
// (max, sum) through distributed shared memory: one read again.
#pragma once
#include <cooperative_groups.h>

#include <cstdint>
#include <string>

#include "common/arch.cuh"
#include "lessons/04_online_softmax/parts.cuh"

namespace lesson04 {

constexpr int kClusterThreads = 512;
constexpr int kClusterMax = 8;                          // the largest portable cluster
constexpr std::int64_t kClusterPartBytes = 64 << 10;    // aim: at most 64 KiB of the row per CTA
constexpr std::int64_t kClusterMinRowBytes = 32 << 10;  // shorter rows fit one block (step 3)

// CTAs per row: the fewest (2, 4 or 8) that keep each CTA's part of the row within 64 KiB.
inline int cluster_size(std::int64_t cols, int elem_bytes) {
  int c = 2;
  while (c < kClusterMax && cols * elem_bytes > c * kClusterPartBytes) c *= 2;
  return c;
}

// Elements of the row per CTA, a whole number of packs so that every part starts aligned.
inline std::int64_t cluster_part(std::int64_t cols, int size, int pack) {
  const std::int64_t per = (cols + size - 1) / size;
  return (per + pack - 1) / pack * pack;
}

// Step 6: the CTAs of a cluster split a row that one SM's shared memory cannot hold; each caches
// its part (one read), they swap their partial (max, sum) through distributed shared memory and
// combine them, and each writes its part (one write). Rows of up to 8 x 227 KiB. Compiled out below
// sm_90 (no clusters there); the launcher refuses it where its sm_90 code is missing.
template <class T, int Pack, int kThreads>
__global__ void __launch_bounds__(kThreads, kFullSmThreads / kThreads)
    softmax_cluster(const T* __restrict__ x, T* __restrict__ y, int cols, float scale, int part) {
#if KL_ARCH_AT_LEAST(90)
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) unsigned char smem[];
  T* cache = reinterpret_cast<T*>(smem);
  __shared__ kl::MaxSum partial;  // this CTA's (max, sum), read by every CTA of the cluster
  const std::int64_t row = blockIdx.x / cluster.num_blocks();
  const int begin = static_cast<int>(cluster.block_rank()) * part;
  const int n = cols - begin < part ? cols - begin : part;  // the last part may be short (never empty)
  const T* xr = x + row * cols + begin;
  T* yr = y + row * cols + begin;
  const RowPacks<Pack> r(xr, n);
  T* const rc = cache + r.shift;
  const float m = kl::block_allreduce<kThreads, kl::MaxOp>(cache_and_max<Pack, kThreads>(xr, cache, r, scale));
  float s = exp_sum<Pack, kThreads>(rc, r, scale, m);
  s = kl::block_allreduce<kThreads>(s);
  // a part of only -inf adds nothing
  if (threadIdx.x == 0) partial = m == -INFINITY ? kl::MaxSum{m, 0.f} : kl::MaxSum{m, s};
  cluster.sync();  // every CTA's partial is written
  kl::MaxSum total{-INFINITY, 0.f};
  for (unsigned r = 0; r < cluster.num_blocks(); ++r) total = kl::combine(total, *cluster.map_shared_rank(&partial, r));
  cluster.sync();  // no CTA may exit while another still reads its partial
  const float inv = 1.f / total.s;
  store_probs<Pack, kThreads>(rc, yr, r, scale, total.m, inv);
#endif
}

// Why step 6 cannot run here ("" when it can): the GPU is older than sm_90, or this build holds no
// sm_90 code of its kernel (e.g. a PTX-only compute_80 build, JIT-compiled on an H100, whose kernel
// is empty). Asked once; every instantiation is compiled for the same architectures.
inline const std::string& cluster_missing() {
  static const std::string why = kl::arch_missing(softmax_cluster<float, 4, kClusterThreads>, 90);
  return why;
}

// One launch of step 6 for element type T and packs of Pack elements: a cluster of 2-8 CTAs per row.
template <class T, int Pack>
void launch_cluster_t(const Problem& p, cudaStream_t s) {
  const auto kernel = softmax_cluster<T, Pack, kClusterThreads>;
  kl::require_arch<softmax_cluster<T, Pack, kClusterThreads>>(90);
  static const bool ready = allow_large_smem(kernel);
  (void)ready;
  const int size = cluster_size(p.cols, sizeof(T));
  const auto part = static_cast<int>(cluster_part(p.cols, size, Pack));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = size;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(size * p.rows));  // one cluster per row
  cfg.blockDim = dim3(kClusterThreads);
  cfg.dynamicSmemBytes = cache_bytes<T, Pack>(part);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(p.x), static_cast<T*>(p.y),
                                static_cast<int>(p.cols), p.scale, part));
}

inline void launch_cluster(const Problem& p, Workspace&, cudaStream_t s) {
  for_block_kernels(p, [&](auto t, auto pack) { launch_cluster_t<decltype(t), decltype(pack)::value>(p, s); });
}

}  // namespace lesson04
