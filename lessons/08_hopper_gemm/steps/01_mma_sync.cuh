// Lesson 08, step 1: the Ampere tensor-core GEMM, the baseline. A block of 8 warps computes a 128 x 128
// tile of D; each warp a 64 x 32 part of it as 4 x 4 mma.sync m16n8k16 tiles, its fragments read from
// shared memory by ldmatrix (B through .trans: B is [K, N], N contiguous). The 32-wide k-tiles of A and
// B stream in by cp.async, 4 stages deep, so three tiles are in flight while one is multiplied. Rows are
// padded by 16 bytes so that the 8 rows an ldmatrix reads fall in 8 different bank groups. sm_80+.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/arch.cuh"
#include "common/ptx.cuh"
#include "lessons/08_hopper_gemm/parts.cuh"

namespace lesson08 {

constexpr int kMmaBm = 128, kMmaBn = 128, kMmaBk = 32, kMmaStages = 4, kMmaThreads = 256;
constexpr int kMmaLda = kMmaBk + 8, kMmaLdb = kMmaBn + 8;  // padded row lengths in elements
constexpr int kMmaSmem = kMmaStages * (kMmaBm * kMmaLda + kMmaBk * kMmaLdb) * 2;

template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) kl::mma_16816(c, a, b0, b1);
  else kl::mma_16816_bf16(c, a, b0, b1);
}

// k-tile kt of A (128 x 32) and B (32 x 128) into one stage, 16 bytes per cp.async, two of each a
// thread; chunks past M, N or K read nothing and are zero-filled.
template <class T>
__device__ __forceinline__ void load_mma_tile(const Problem& p, T* as, T* bs, int m0, int n0, int kt) {
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  const int k0 = kt * kMmaBk;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int c = threadIdx.x + i * kMmaThreads;
    const int ar = c / 4, ak = (c % 4) * 8;  // A: 128 rows of 4 chunks
    const bool a_ok = m0 + ar < p.m && k0 + ak < p.k;
    kl::cp_async16(as + ar * kMmaLda + ak, a_ok ? a + static_cast<std::int64_t>(m0 + ar) * p.k + k0 + ak : a,
                   a_ok ? 16 : 0);
    const int br = c / 16, bn = (c % 16) * 8;  // B: 32 rows of 16 chunks
    const bool b_ok = k0 + br < p.k && n0 + bn < p.n;
    kl::cp_async16(bs + br * kMmaLdb + bn, b_ok ? b + static_cast<std::int64_t>(k0 + br) * p.n + n0 + bn : b,
                   b_ok ? 16 : 0);
  }
}

template <class T>
__global__ void __launch_bounds__(kMmaThreads) gemm_mma_sync(Problem p, TileOrder order) {
#if KL_ARCH_AT_LEAST(80)
  extern __shared__ __align__(128) unsigned char smem[];
  T* as = reinterpret_cast<T*>(smem);          // [stages][128][kMmaLda]
  T* bs = as + kMmaStages * kMmaBm * kMmaLda;  // [stages][32][kMmaLdb]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;  // this warp's 64 x 32 part: rows 64wm, columns 32wn
  int tm, tn;
  order.tile(blockIdx.x, tm, tn);
  const int m0 = tm * kMmaBm, n0 = tn * kMmaBn, kts = (p.k + kMmaBk - 1) / kMmaBk;

  float acc[4][4][4] = {};
#pragma unroll
  for (int s = 0; s < kMmaStages - 1; ++s) {
    if (s < kts) load_mma_tile(p, as + s * kMmaBm * kMmaLda, bs + s * kMmaBk * kMmaLdb, m0, n0, s);
    kl::cp_async_commit();
  }
  // ldmatrix: lane l gives the address of row l % 8 of the 8x8 matrix l / 8.
  const int lr = (lane / 8 % 2) * 8 + lane % 8, lc = (lane / 16) * 8;
  for (int kt = 0; kt < kts; ++kt) {
    kl::cp_async_wait<kMmaStages - 2>();  // tile kt has landed (for this thread's copies)
    __syncthreads();                      // ... for every thread's, and the stage of kt - 1 is free
    const int next = kt + kMmaStages - 1, ns = next % kMmaStages;
    if (next < kts) load_mma_tile(p, as + ns * kMmaBm * kMmaLda, bs + ns * kMmaBk * kMmaLdb, m0, n0, next);
    kl::cp_async_commit();
    const T* a = as + (kt % kMmaStages) * kMmaBm * kMmaLda;
    const T* b = bs + (kt % kMmaStages) * kMmaBk * kMmaLdb;
#pragma unroll
    for (int kk = 0; kk < kMmaBk; kk += 16) {
      std::uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) kl::ldmatrix_x4(af[i], a + (64 * wm + 16 * i + lr) * kMmaLda + kk + lc);
#pragma unroll
      for (int j = 0; j < 2; ++j) {  // matrices: k rows 0-7 and 8-15 of n-tiles 2j and 2j + 1
        std::uint32_t r[4];
        kl::ldmatrix_x4_trans(r, b + (kk + lr) * kMmaLdb + 32 * wn + 16 * j + lc);
        bf[2 * j][0] = r[0], bf[2 * j][1] = r[1], bf[2 * j + 1][0] = r[2], bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_16816<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  // C fragment: rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 tile.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = m0 + 64 * wm + 16 * i + g, col = n0 + 32 * wn + 8 * j + 2 * t;
      store_pair<T>(p, row, col, acc[i][j][0], acc[i][j][1]);
      store_pair<T>(p, row + 8, col, acc[i][j][2], acc[i][j][3]);
    }
#endif
}

template <class T>
void launch_mma_sync_as(const Problem& p, cudaStream_t s) {
  require_aligned(p);
  kl::require_arch<gemm_mma_sync<T>>(80);
  CUDA_CHECK(cudaFuncSetAttribute(gemm_mma_sync<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMmaSmem));
  const TileOrder order{(p.m + kMmaBm - 1) / kMmaBm, (p.n + kMmaBn - 1) / kMmaBn};
  gemm_mma_sync<T><<<order.count(), kMmaThreads, kMmaSmem, s>>>(p, order);
  CUDA_CHECK_LAUNCH();
}

inline void launch_mma_sync(const Problem& p, cudaStream_t s) {
  if (p.dtype == Dtype::bf16) launch_mma_sync_as<__nv_bfloat16>(p, s);
  else launch_mma_sync_as<__half>(p, s);
}

}  // namespace lesson08
