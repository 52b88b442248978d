// Lesson 06 — the device pieces several steps share, each under the step that introduced it: the
// plain GEMM's output, alpha·acc + beta·C (step 1), the block tile of steps 3-5 (step 3), and the
// 16-byte tile loader, the outer product and the split-column compute and store of steps 4-5 (step 4;
// step 6 keeps the outer product and the 4-wide store). The bias and the activation are step 7's
// (steps/07_fused_epilogue.cuh) and the product's (gemm.cuh). The exercise builds on this file alone.
#pragma once
#include <algorithm>
#include <cstdint>

#include "common/ptx.cuh"
#include "lessons/06_tiled_gemm/problem.cuh"

namespace lesson06 {

// ---- step 1: the plain GEMM's output, alpha·acc + beta·C ------------------------------------------

// What steps 1-5 write for an accumulator: alpha·acc, plus beta·C where beta != 0 (C is not read
// otherwise). A type, so that it is also the Epi of store4 and store_split (step 4).
struct Plain {
  static __device__ __forceinline__ float apply(const Problem& p, float acc, int m, int n) {
    float v = p.alpha * acc;
    if (p.beta != 0.f) v = fmaf(p.beta, p.c[std::int64_t{m} * p.ldc + n], v);
    return v;
  }
};

// ---- step 3: the block tile of steps 3-5 ----------------------------------------------------------

// Steps 3-5 use a 128x128 block tile, K in slices of 16 (half the barriers of 8), 256 threads of 8x8
// outputs each.
constexpr int kBM = 128, kBN = 128, kBK = 16, kThreads = 256, kTM = 8, kTN = 8;

inline dim3 tile_grid(const Problem& p, int bm, int bn, int slices = 1) {
  return dim3((p.n + bn - 1) / bn, (p.m + bm - 1) / bm, slices);
}

// ---- step 4: 16-byte loads, A transposed in shared memory, 16-byte stores -------------------------

__host__ __device__ inline bool aligned16(const void* ptr, int ld) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0 && ld % 4 == 0;
}

// Four consecutive floats from `at` (column c of a row of `cols`): one 16-byte load when they are all
// inside and aligned, else checked single loads with zeros past the edge (tails stay in the kernel).
__device__ __forceinline__ float4 load4(const float* at, int c, int cols, bool vec) {
  if (vec && c + 3 < cols) return *reinterpret_cast<const float4*>(at);
  return make_float4(c < cols ? at[0] : 0.f, c + 1 < cols ? at[1] : 0.f, c + 2 < cols ? at[2] : 0.f,
                     c + 3 < cols ? at[3] : 0.f);
}

// Moves one BMxBK tile of A and one BKxBN tile of B through registers into shared memory, 16 bytes a
// thread at a time, walking K from start(); each thread keeps pointers into A and B that advance by
// one tile per load. A is stored transposed (as[k][m]) so that a thread's column of A is contiguous;
// its rows are padded by 4 floats so the transposing stores of a warp fall in different banks.
template <int BM, int BN, int BK, int Threads>
struct TileLoader {
  static constexpr int kPadA = 4, kLdA = BM + kPadA, kLdB = BN;
  static constexpr int kA = BM * BK / 4 / Threads, kB = BK * BN / 4 / Threads;  // float4 per thread
  static_assert(kA >= 1 && kB >= 1 && kA * 4 * Threads == BM * BK && kB * 4 * Threads == BK * BN, "tile/threads");
  float4 ra[kA], rb[kB];
  const float* pa[kA];
  const float* pb[kB];
  int k, n_left;  // the next tile's first k; columns of B left from this block's n0
  bool vec_a, vec_b, a_row[kA];

  static __device__ __forceinline__ int a_r(int i) { return (threadIdx.x + i * Threads) / (BK / 4); }
  static __device__ __forceinline__ int a_c(int i) { return (threadIdx.x + i * Threads) % (BK / 4) * 4; }
  static __device__ __forceinline__ int b_r(int i) { return (threadIdx.x + i * Threads) / (BN / 4); }
  static __device__ __forceinline__ int b_c(int i) { return (threadIdx.x + i * Threads) % (BN / 4) * 4; }

  __device__ __forceinline__ void start(const Problem& p, int m0, int n0, int k0) {
    k = k0;
    n_left = p.n - n0;
    vec_a = aligned16(p.a, p.lda);
    vec_b = aligned16(p.b, p.ldb);
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      a_row[i] = m0 + a_r(i) < p.m;
      pa[i] = p.a + std::int64_t{a_row[i] ? m0 + a_r(i) : 0} * p.lda + k0 + a_c(i);
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) pb[i] = p.b + std::int64_t{k0 + b_r(i)} * p.ldb + n0 + b_c(i);
  }

  __device__ __forceinline__ void load(const Problem& p, int k_end) {
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      ra[i] = a_row[i] ? load4(pa[i], k + a_c(i), k_end, vec_a) : make_float4(0.f, 0.f, 0.f, 0.f);
      pa[i] += BK;
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      rb[i] = k + b_r(i) < k_end ? load4(pb[i], b_c(i), n_left, vec_b) : make_float4(0.f, 0.f, 0.f, 0.f);
      pb[i] += std::int64_t{BK} * p.ldb;
    }
    k += BK;
  }
  __device__ __forceinline__ void store(float* as, float* bs) const {
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int r = a_r(i), c = a_c(i);
      as[(c + 0) * kLdA + r] = ra[i].x;
      as[(c + 1) * kLdA + r] = ra[i].y;
      as[(c + 2) * kLdA + r] = ra[i].z;
      as[(c + 3) * kLdA + r] = ra[i].w;
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      *reinterpret_cast<float4*>(&bs[b_r(i) * kLdB + b_c(i)]) = rb[i];
    }
  }
};

using Loader128 = TileLoader<kBM, kBN, kBK, kThreads>;

// acc[4Q][8] += a x (b0, b1): the outer product of a thread's 4Q A values and 8 B values (step 6: Q = 2 or 4).
template <int Q>
__device__ __forceinline__ void outer(float (&acc)[4 * Q][8], const float4 (&a4)[Q], float4 b0, float4 b1) {
  const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
  for (int q = 0; q < Q; ++q) {
    const float a[4] = {a4[q].x, a4[q].y, a4[q].z, a4[q].w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[4 * q + i][j] = fmaf(a[i], b[j], acc[4 * q + i][j]);
  }
}

// Thread (ty, tx) owns rows ty*8 .. ty*8+7 of the block tile and two groups of 4 columns, tx*4 ..
// tx*4+3 and 64+tx*4 .. 64+tx*4+3. One k-slice is 4 16-byte reads for 64 FMAs, and the B reads of 8
// neighbouring threads (one shared-memory wavefront's worth) cover 128 contiguous bytes: no bank
// conflict (8 contiguous columns a thread would span 256 bytes and conflict 2-way).
__device__ __forceinline__ void compute_split(float (&acc)[8][8], const float* as, const float* bs) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll
  for (int kk = 0; kk < kBK; ++kk) {
    const float4* a = reinterpret_cast<const float4*>(as + kk * Loader128::kLdA + ty * 8);
    const float* b = bs + kk * Loader128::kLdB + tx * 4;
    outer<2>(acc, {a[0], a[1]}, *reinterpret_cast<const float4*>(b), *reinterpret_cast<const float4*>(b + 64));
  }
}

// Four accumulators of row m, columns n..n+3, through the epilogue into d: one 16-byte store when
// the four are inside and d's rows are 16-byte aligned, else one checked store each (step 6 too).
template <class Epi>
__device__ __forceinline__ void store4(const Problem& p, float* d, bool vec_d, int m, int n, float4 acc) {
  if (m >= p.m) return;
  float* row = d + std::int64_t{m} * p.ldd;
  if (vec_d && n + 3 < p.n) {
    *reinterpret_cast<float4*>(row + n) = make_float4(Epi::apply(p, acc.x, m, n), Epi::apply(p, acc.y, m, n + 1),
                                                      Epi::apply(p, acc.z, m, n + 2), Epi::apply(p, acc.w, m, n + 3));
    return;
  }
  const float v[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (n + j < p.n) row[n + j] = Epi::apply(p, v[j], m, n + j);
}

// The split columns of compute_split, through the epilogue into D, 16 bytes at a time.
template <class Epi>
__device__ __forceinline__ void store_split(const Problem& p, const float (&acc)[8][8], int m0, int n0) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const bool vec_d = aligned16(p.d, p.ldd);
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      store4<Epi>(p, p.d, vec_d, m0 + ty * 8 + i, n0 + 64 * h + tx * 4,
                  make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]));
}

// ---- step 6: the cp.async tile loader of steps 6-7 ------------------------------------------------

// Copies one BMxBK tile of A and one BKxBN tile of B straight into a shared-memory stage with
// cp.async (kl::cp_async4/16: no staging registers), walking K from start(). A is transposed on the
// way (as[k][m], rows padded by 4 floats) by 4-byte copies whose lanes walk k (one 32-byte sector per
// row of A in global memory); B goes in 16-byte copies (4-byte ones where B's rows are not 16-byte
// aligned). Zero-fill past the edges, so tails stay in the kernel.
template <int BM, int BN, int BK, int Threads>
struct AsyncTileLoader {
  static constexpr int kLdA = BM + 4, kLdB = BN;
  static constexpr int kRowsA = Threads / BK, kA = BM / kRowsA;        // A: kA copies of 4 bytes
  static constexpr int kRowsB = Threads / (BN / 4), kB = BK / kRowsB;  // B: kB copies of 16 bytes
  static_assert(kRowsA * BK == Threads && kA * kRowsA == BM && kRowsB * (BN / 4) == Threads && kB * kRowsB == BK,
                "tile/threads");
  const float* pa;              // A[m0 + ra][k + ka]
  const float* pb;              // B[k + rb][n0 + cb]
  std::int64_t a_step, b_step;  // kRowsA rows of A, kRowsB rows of B
  int k, ka, ra, rb, cb, n_left, m_left;
  bool vec_b;

  __device__ __forceinline__ void start(const Problem& p, int m0, int n0, int k0) {
    k = k0;
    ka = threadIdx.x % BK;
    ra = threadIdx.x / BK;
    rb = threadIdx.x / (BN / 4);
    cb = threadIdx.x % (BN / 4) * 4;
    m_left = p.m - m0;
    n_left = p.n - n0;
    vec_b = aligned16(p.b, p.ldb);
    pa = p.a + std::int64_t{m0 + ra} * p.lda + k0 + ka;
    pb = p.b + std::int64_t{k0 + rb} * p.ldb + n0 + cb;
    a_step = std::int64_t{kRowsA} * p.lda;
    b_step = std::int64_t{kRowsB} * p.ldb;
  }

  __device__ __forceinline__ void copy(const Problem& p, int k_end, float* as, float* bs) {
    const bool k_in = k + ka < k_end;
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const bool in = k_in && ra + i * kRowsA < m_left;
      kl::cp_async4(as + ka * kLdA + ra + i * kRowsA, in ? pa + i * a_step : p.a, in ? 4 : 0);
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      const bool row_in = k + rb + i * kRowsB < k_end;
      const float* src = pb + i * b_step;
      float* dst = bs + (rb + i * kRowsB) * kLdB + cb;
      if (vec_b) {
        const int bytes = row_in ? 4 * max(0, min(4, n_left - cb)) : 0;
        kl::cp_async16(dst, bytes ? src : p.b, bytes);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const bool in = row_in && cb + j < n_left;
          kl::cp_async4(dst + j, in ? src + j : p.b, in ? 4 : 0);
        }
      }
    }
    pa += BK;
    pb += std::int64_t{BK} * p.ldb;
    k += BK;
  }
};

}  // namespace lesson06
