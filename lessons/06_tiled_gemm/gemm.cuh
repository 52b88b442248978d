// Lesson 06 — tiled SGEMM with double buffering and a fused epilogue:
//   D = act(alpha · A·B + beta · C + bias),  A [M, K], B [K, N], C and D [M, N], float32, row-major
// with leading dimensions. Steps 1-6 compute the GEMM part (alpha · A·B + beta · C); step 7 adds the
// bias and the activation inside the same kernel. main.cu and test.cu walk kSteps (the end of this
// file), so a new step is benchmarked and tested by adding one entry.
#pragma once
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/parallel.hpp"
#include "common/reference.hpp"

namespace lesson06 {

// ---- the problem ----------------------------------------------------------------------------------

enum class Bias { none, m, n, full };  // bias[m], bias[n], or a full [M, N] matrix (leading dimension N)
enum class Act { none, relu, leaky, gelu_tanh, gelu_erf };

inline const char* bias_name(Bias b) {
  const char* names[] = {"none", "m", "n", "full"};
  return names[static_cast<int>(b)];
}
inline const char* act_name(Act a) {
  const char* names[] = {"none", "relu", "leaky", "gelu_tanh", "gelu_erf"};
  return names[static_cast<int>(a)];
}

// One call. C is read only when beta != 0 (it may then be nullptr), and may be D itself (in place,
// with ldc == ldd). M, N or K = 0 is a no-op: nothing is launched and D is left as it was.
struct Problem {
  const float* a = nullptr;
  const float* b = nullptr;
  const float* c = nullptr;
  float* d = nullptr;
  const float* bias = nullptr;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0, ldd = 0;
  float alpha = 1.f, beta = 0.f;
  Bias bias_kind = Bias::none;
  Act act = Act::none;
  float slope = 0.01f;  // LeakyReLU's slope for x < 0
};

// The GEMM part only (what steps 1-6 and cuBLAS compute): the same problem without bias and activation.
inline Problem plain(Problem p) {
  p.bias_kind = Bias::none;
  p.act = Act::none;
  return p;
}

constexpr int kMaxRows = 1 << 19;  // grid.y of the naive kernel stays below 65536 blocks

// Refuses what no step can do, before anything is launched.
inline void validate(const Problem& p) {
  const auto fail = [](const std::string& why) { throw kl::UsageError(why); };
  if (p.m < 0 || p.n < 0 || p.k < 0) fail("M, N and K must not be negative");
  if (p.m > kMaxRows) fail("M = " + std::to_string(p.m) + " is too large (at most 2^19)");
  if (p.lda < std::max(p.k, 1)) fail("lda = " + std::to_string(p.lda) + " is smaller than K = " + std::to_string(p.k));
  if (p.ldb < std::max(p.n, 1)) fail("ldb = " + std::to_string(p.ldb) + " is smaller than N = " + std::to_string(p.n));
  if (p.ldd < std::max(p.n, 1)) fail("ldd = " + std::to_string(p.ldd) + " is smaller than N = " + std::to_string(p.n));
  if (p.beta != 0.f && p.ldc < std::max(p.n, 1)) fail("ldc = " + std::to_string(p.ldc) + " is smaller than N");
  if (p.m == 0 || p.n == 0 || p.k == 0) return;
  if (!p.a || !p.b || !p.d) fail("A, B and D must not be null");
  if (p.beta != 0.f && !p.c) fail("beta != 0 needs C");
  if (p.bias_kind != Bias::none && !p.bias) fail(std::string("bias ") + bias_name(p.bias_kind) + " needs a bias vector");
  if (p.c == p.d && p.beta != 0.f && p.ldc != p.ldd) fail("C aliasing D (in place) needs ldc == ldd");
}

// ---- the epilogue ---------------------------------------------------------------------------------

template <Act A>
__host__ __device__ __forceinline__ float activate(float x, float slope) {
  if constexpr (A == Act::relu) return x < 0.f ? 0.f : x;  // NaN stays NaN
  else if constexpr (A == Act::leaky) return x < 0.f ? slope * x : x;
  else if constexpr (A == Act::gelu_tanh) return 0.5f * x * (1.f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
  else if constexpr (A == Act::gelu_erf) return 0.5f * x * (1.f + erff(x * 0.7071067812f));
  else return x;
}

template <Bias B>
__device__ __forceinline__ float bias_at(const Problem& p, int m, int n) {
  if constexpr (B == Bias::m) return p.bias[m];
  else if constexpr (B == Bias::n) return p.bias[n];
  else if constexpr (B == Bias::full) return p.bias[std::int64_t{m} * p.n + n];
  else return 0.f;
}

// The fused epilogue as template arguments: each (bias, activation, beta·C) combination is its own
// kernel, so the code that runs holds no branch on them.
template <Bias B, Act A, bool HasC>
struct Fused {
  static __device__ __forceinline__ float apply(const Problem& p, float acc, int m, int n) {
    float v = p.alpha * acc;
    if constexpr (HasC) v = fmaf(p.beta, p.c[std::int64_t{m} * p.ldc + n], v);
    if constexpr (B != Bias::none) v += bias_at<B>(p, m, n);
    return activate<A>(v, p.slope);
  }
};

// The same arithmetic chosen at run time: for the naive kernel, steps 2-5 and the split-K reduction.
struct Runtime {
  static __device__ float apply(const Problem& p, float acc, int m, int n) {
    float v = p.alpha * acc;
    if (p.beta != 0.f) v = fmaf(p.beta, p.c[std::int64_t{m} * p.ldc + n], v);
    switch (p.bias_kind) {
      case Bias::m: v += bias_at<Bias::m>(p, m, n); break;
      case Bias::n: v += bias_at<Bias::n>(p, m, n); break;
      case Bias::full: v += bias_at<Bias::full>(p, m, n); break;
      default: break;
    }
    switch (p.act) {
      case Act::relu: return activate<Act::relu>(v, p.slope);
      case Act::leaky: return activate<Act::leaky>(v, p.slope);
      case Act::gelu_tanh: return activate<Act::gelu_tanh>(v, p.slope);
      case Act::gelu_erf: return activate<Act::gelu_erf>(v, p.slope);
      default: return v;
    }
  }
};

// Four accumulators of row m, columns n..n+3, through the epilogue into d: one 16-byte store when
// the four are inside and d's rows are 16-byte aligned, else one checked store each.
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

__host__ __device__ inline bool aligned16(const void* ptr, int ld) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0 && ld % 4 == 0; }

// ---- step 1: one thread per output ------------------------------------------------------------------

// Each thread walks a row of A and a column of B from global memory: 2 loads per FMA, all from L1/L2.
__global__ void gemm_naive(Problem p) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= p.m || n >= p.n) return;
  const float* a = p.a + std::int64_t{m} * p.lda;
  float acc = 0.f;
  for (int k = 0; k < p.k; ++k) acc = fmaf(a[k], p.b[std::int64_t{k} * p.ldb + n], acc);
  p.d[std::int64_t{m} * p.ldd + n] = Runtime::apply(p, acc, m, n);
}

inline void launch_naive(const Problem& p, cudaStream_t s) {
  const dim3 block(16, 16);
  gemm_naive<<<dim3((p.n + 15) / 16, (p.m + 15) / 16), block, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// ---- step 2: shared-memory tiles ------------------------------------------------------------------

constexpr int kT2 = 32;

// A 32x32 block stages 32x32 tiles of A and B in shared memory (coalesced loads, zero past the edges):
// each value loaded from global memory is used 32 times.
__global__ void gemm_smem_tiles(Problem p) {
  __shared__ float as[kT2][kT2];
  __shared__ float bs[kT2][kT2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m = blockIdx.y * kT2 + ty, n = blockIdx.x * kT2 + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < p.k; k0 += kT2) {
    as[ty][tx] = m < p.m && k0 + tx < p.k ? p.a[std::int64_t{m} * p.lda + k0 + tx] : 0.f;
    bs[ty][tx] = k0 + ty < p.k && n < p.n ? p.b[std::int64_t{k0 + ty} * p.ldb + n] : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kT2; ++kk) acc = fmaf(as[ty][kk], bs[kk][tx], acc);
    __syncthreads();
  }
  if (m < p.m && n < p.n) p.d[std::int64_t{m} * p.ldd + n] = Runtime::apply(p, acc, m, n);
}

inline void launch_smem_tiles(const Problem& p, cudaStream_t s) {
  gemm_smem_tiles<<<dim3((p.n + kT2 - 1) / kT2, (p.m + kT2 - 1) / kT2), dim3(kT2, kT2), 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// ---- step 3: a register tile per thread -----------------------------------------------------------

// Steps 3-5 use a 128x128 block tile, K in slices of 8, 256 threads of 8x8 outputs each.
constexpr int kBM = 128, kBN = 128, kBK = 8, kThreads = 256, kTM = 8, kTN = 8;

// Each thread accumulates an 8x8 tile as outer products: 16 shared loads feed 64 FMAs (step 2: 2 per 1).
__global__ void __launch_bounds__(kThreads) gemm_register_tile(Problem p) {
  __shared__ float as[kBM][kBK];
  __shared__ float bs[kBK][kBN];
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  float acc[kTM][kTN] = {};
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    for (int e = tid; e < kBM * kBK; e += kThreads) {
      const int r = e / kBK, c = e % kBK;
      as[r][c] = m0 + r < p.m && k0 + c < p.k ? p.a[std::int64_t{m0 + r} * p.lda + k0 + c] : 0.f;
    }
    for (int e = tid; e < kBK * kBN; e += kThreads) {
      const int r = e / kBN, c = e % kBN;
      bs[r][c] = k0 + r < p.k && n0 + c < p.n ? p.b[std::int64_t{k0 + r} * p.ldb + n0 + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float a[kTM], b[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i) a[i] = as[ty * kTM + i][kk];
#pragma unroll
      for (int j = 0; j < kTN; ++j) b[j] = bs[kk][tx * kTN + j];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int m = m0 + ty * kTM + i, n = n0 + tx * kTN + j;
      if (m < p.m && n < p.n) p.d[std::int64_t{m} * p.ldd + n] = Runtime::apply(p, acc[i][j], m, n);
    }
}

inline dim3 tile_grid(const Problem& p, int bm, int bn, int slices = 1) {
  return dim3((p.n + bn - 1) / bn, (p.m + bm - 1) / bm, slices);
}

inline void launch_register_tile(const Problem& p, cudaStream_t s) {
  gemm_register_tile<<<tile_grid(p, kBM, kBN), kThreads, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// ---- steps 4-7: 16-byte loads, A transposed in shared memory ------------------------------------

// Four consecutive floats of row r, from column c: one 16-byte load when they are all inside and
// aligned, else checked single loads; zeros past the edges (the tails stay inside the kernel).
__device__ __forceinline__ float4 load4(const float* x, int ld, int r, int c, int rows, int cols, bool vec) {
  if (r >= rows) return make_float4(0.f, 0.f, 0.f, 0.f);
  const float* row = x + std::int64_t{r} * ld;
  if (vec && c + 3 < cols) return *reinterpret_cast<const float4*>(row + c);
  return make_float4(c < cols ? row[c] : 0.f, c + 1 < cols ? row[c + 1] : 0.f, c + 2 < cols ? row[c + 2] : 0.f,
                     c + 3 < cols ? row[c + 3] : 0.f);
}

// Moves one BMxBK tile of A and one BKxBN tile of B through registers into shared memory, 16 bytes a
// thread at a time. A is stored transposed (as[k][m]) so that a thread's column of A is contiguous;
// its rows are padded by 4 floats so the transposing stores of a warp fall in different banks.
template <int BM, int BN, int BK, int Threads>
struct TileLoader {
  static constexpr int kPadA = 4, kLdA = BM + kPadA, kLdB = BN;
  static constexpr int kA = BM * BK / 4 / Threads, kB = BK * BN / 4 / Threads;  // float4 per thread
  static_assert(kA >= 1 && kB >= 1 && kA * 4 * Threads == BM * BK && kB * 4 * Threads == BK * BN, "tile/threads");
  float4 ra[kA], rb[kB];

  __device__ __forceinline__ void load(const Problem& p, bool vec_a, bool vec_b, int m0, int n0, int k0, int k_end) {
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int e = threadIdx.x + i * Threads, r = e / (BK / 4), c = e % (BK / 4) * 4;
      ra[i] = load4(p.a, p.lda, m0 + r, k0 + c, p.m, k_end, vec_a);
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      const int e = threadIdx.x + i * Threads, r = e / (BN / 4), c = e % (BN / 4) * 4;
      rb[i] = load4(p.b, p.ldb, k0 + r, n0 + c, k_end, p.n, vec_b);
    }
  }
  __device__ __forceinline__ void store(float* as, float* bs) const {
#pragma unroll
    for (int i = 0; i < kA; ++i) {
      const int e = threadIdx.x + i * Threads, r = e / (BK / 4), c = e % (BK / 4) * 4;
      as[(c + 0) * kLdA + r] = ra[i].x;
      as[(c + 1) * kLdA + r] = ra[i].y;
      as[(c + 2) * kLdA + r] = ra[i].z;
      as[(c + 3) * kLdA + r] = ra[i].w;
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      const int e = threadIdx.x + i * Threads, r = e / (BN / 4), c = e % (BN / 4) * 4;
      *reinterpret_cast<float4*>(&bs[r * kLdB + c]) = rb[i];
    }
  }
};

// acc[8][8] += (a0, a1) x (b0, b1): the outer product of a thread's 8 A values and 8 B values.
__device__ __forceinline__ void outer8(float (&acc)[8][8], float4 a0, float4 a1, float4 b0, float4 b1) {
  const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
  const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}

using Loader128 = TileLoader<kBM, kBN, kBK, kThreads>;

// Steps 4-5: thread (ty, tx) owns rows ty*8.. and columns tx*8.. of the block tile; one k-slice of
// the tile in shared memory is 4 16-byte reads for 64 FMAs.
__device__ __forceinline__ void compute_contiguous(float (&acc)[8][8], const float* as, const float* bs) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll
  for (int kk = 0; kk < kBK; ++kk) {
    const float4* a = reinterpret_cast<const float4*>(as + kk * Loader128::kLdA + ty * 8);
    const float4* b = reinterpret_cast<const float4*>(bs + kk * Loader128::kLdB + tx * 8);
    outer8(acc, a[0], a[1], b[0], b[1]);
  }
}

template <class Epi>
__device__ __forceinline__ void store_contiguous(const Problem& p, const float (&acc)[8][8], int m0, int n0) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const bool vec_d = aligned16(p.d, p.ldd);
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      store4<Epi>(p, p.d, vec_d, m0 + ty * 8 + i, n0 + tx * 8 + 4 * h,
                  make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]));
}

// Step 4: 16-byte global loads, A transposed so each thread reads its 8 A values as two float4
// (step 3: 8 single reads), and 16-byte stores of D. Load, barrier, compute, barrier: one stage.
__global__ void __launch_bounds__(kThreads, 2) gemm_vector(Problem p) {
  __shared__ __align__(16) float as[kBK * Loader128::kLdA];
  __shared__ __align__(16) float bs[kBK * Loader128::kLdB];
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const bool vec_a = aligned16(p.a, p.lda), vec_b = aligned16(p.b, p.ldb);
  Loader128 tile;
  float acc[8][8] = {};
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    tile.load(p, vec_a, vec_b, m0, n0, k0, p.k);
    tile.store(as, bs);
    __syncthreads();
    compute_contiguous(acc, as, bs);
    __syncthreads();
  }
  store_contiguous<Runtime>(p, acc, m0, n0);
}

inline void launch_vector(const Problem& p, cudaStream_t s) {
  gemm_vector<<<tile_grid(p, kBM, kBN), kThreads, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// Step 5: two shared-memory stages. The loads of tile k+1 are issued before tile k's FMAs and stored
// to the other stage after them, so their latency hides behind the math; one barrier per tile.
__global__ void __launch_bounds__(kThreads, 2) gemm_double_buffer(Problem p) {
  __shared__ __align__(16) float as[2][kBK * Loader128::kLdA];
  __shared__ __align__(16) float bs[2][kBK * Loader128::kLdB];
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const bool vec_a = aligned16(p.a, p.lda), vec_b = aligned16(p.b, p.ldb);
  Loader128 tile;
  float acc[8][8] = {};
  tile.load(p, vec_a, vec_b, m0, n0, 0, p.k);
  tile.store(as[0], bs[0]);
  __syncthreads();
  int stage = 0;
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    const bool more = k0 + kBK < p.k;
    if (more) tile.load(p, vec_a, vec_b, m0, n0, k0 + kBK, p.k);
    compute_contiguous(acc, as[stage], bs[stage]);
    if (more) tile.store(as[stage ^ 1], bs[stage ^ 1]);
    __syncthreads();
    stage ^= 1;
  }
  store_contiguous<Runtime>(p, acc, m0, n0);
}

inline void launch_double_buffer(const Problem& p, cudaStream_t s) {
  gemm_double_buffer<<<tile_grid(p, kBM, kBN), kThreads, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// ---- step 6: warp tiling, tuned tile sizes --------------------------------------------------------

// A block tile BM x BN x BK made of 32x64 warp tiles: in a warp, lane (lm, ln) = (lane / 8, lane % 8)
// owns four 4x4 quadrants, rows lm*4 + {0, 16} and columns ln*4 + {0, 32} of the warp tile.
template <int BM_, int BN_, int BK_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int kWarpsN = BN / 64, kThreads = BM / 32 * kWarpsN * 32;
  // 256 threads: 2 blocks an SM (<= 128 registers); smaller blocks: <= 170 registers, so their
  // larger share of load staging registers does not spill.
  static constexpr int kMinBlocks = kThreads >= 256 ? 512 / kThreads : 384 / kThreads;
  using Loader = TileLoader<BM, BN, BK, kThreads>;
};

// The configuration step 6 and 7 use on the H100 (see the README's tuning table, `lesson06 --tune`).
using Tuned = Config<128, 128, 8>;
// Few output tiles (skinny or small problems): smaller tiles and K split over slices.
using SplitCfg = Config<128, 64, 8>;

// Step 6: lanes read A and B values that sit side by side (32 and 64 consecutive floats per warp),
// so each 16-byte shared read of a warp is one conflict-free wavefront (steps 4-5: two); the block
// tile and K-slice come from tuning. blockIdx.z selects a K slice [z*k_slice, (z+1)*k_slice) whose
// result goes to d + z*slice_stride (split-K; one slice otherwise).
template <class Cfg, class Epi>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    gemm_warp_tiled(Problem p, int k_slice, std::int64_t slice_stride) {
  using Loader = typename Cfg::Loader;
  __shared__ __align__(16) float as[2][Cfg::BK * Loader::kLdA];
  __shared__ __align__(16) float bs[2][Cfg::BK * Loader::kLdB];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / Cfg::kWarpsN * 32 + lane / 8 * 4, wn = warp % Cfg::kWarpsN * 64 + lane % 8 * 4;
  const int m0 = blockIdx.y * Cfg::BM, n0 = blockIdx.x * Cfg::BN;
  const int k_begin = blockIdx.z * k_slice, k_end = min(p.k, k_begin + k_slice);
  const bool vec_a = aligned16(p.a, p.lda), vec_b = aligned16(p.b, p.ldb);
  Loader tile;
  float acc[8][8] = {};
  tile.load(p, vec_a, vec_b, m0, n0, k_begin, k_end);
  tile.store(as[0], bs[0]);
  __syncthreads();
  int stage = 0;
  for (int k0 = k_begin; k0 < k_end; k0 += Cfg::BK) {
    const bool more = k0 + Cfg::BK < k_end;
    if (more) tile.load(p, vec_a, vec_b, m0, n0, k0 + Cfg::BK, k_end);
#pragma unroll
    for (int kk = 0; kk < Cfg::BK; ++kk) {
      const float* a = as[stage] + kk * Loader::kLdA + wm;
      const float* b = bs[stage] + kk * Loader::kLdB + wn;
      outer8(acc, *reinterpret_cast<const float4*>(a), *reinterpret_cast<const float4*>(a + 16),
             *reinterpret_cast<const float4*>(b), *reinterpret_cast<const float4*>(b + 32));
    }
    if (more) tile.store(as[stage ^ 1], bs[stage ^ 1]);
    __syncthreads();
    stage ^= 1;
  }
  float* d = p.d + blockIdx.z * slice_stride;
  const bool vec_d = aligned16(d, p.ldd);
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      store4<Epi>(p, d, vec_d, m0 + wm + i % 4 + 16 * (i / 4), n0 + wn + 32 * h,
                  make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]));
}

template <class Cfg, class Epi>
void launch_warp_tiled(const Problem& p, cudaStream_t s) {
  gemm_warp_tiled<Cfg, Epi><<<tile_grid(p, Cfg::BM, Cfg::BN), Cfg::kThreads, 0, s>>>(p, p.k, 0);
  CUDA_CHECK_LAUNCH();
}

// Calls f(Fused<B, A, HasC>{}) for the problem's bias, activation and beta: the run-time choice
// meets the compiled specialisations here, once per call.
template <class F>
void with_epilogue(const Problem& p, F&& f) {
  const auto with_c = [&](auto b, auto a) {
    if (p.beta != 0.f) f(Fused<decltype(b)::value, decltype(a)::value, true>{});
    else f(Fused<decltype(b)::value, decltype(a)::value, false>{});
  };
  const auto with_act = [&](auto b) {
    switch (p.act) {
      case Act::relu: with_c(b, std::integral_constant<Act, Act::relu>{}); break;
      case Act::leaky: with_c(b, std::integral_constant<Act, Act::leaky>{}); break;
      case Act::gelu_tanh: with_c(b, std::integral_constant<Act, Act::gelu_tanh>{}); break;
      case Act::gelu_erf: with_c(b, std::integral_constant<Act, Act::gelu_erf>{}); break;
      default: with_c(b, std::integral_constant<Act, Act::none>{}); break;
    }
  };
  switch (p.bias_kind) {
    case Bias::m: with_act(std::integral_constant<Bias, Bias::m>{}); break;
    case Bias::n: with_act(std::integral_constant<Bias, Bias::n>{}); break;
    case Bias::full: with_act(std::integral_constant<Bias, Bias::full>{}); break;
    default: with_act(std::integral_constant<Bias, Bias::none>{}); break;
  }
}

// ---- split-K for few output tiles -----------------------------------------------------------------

// Slice partial sums live here between the two kernels; grown on the first (untimed) call of a
// shape, so a repeated call allocates nothing and can be captured in a CUDA graph.
struct Workspace {
  kl::DeviceBuffer<float> partial;
  kl::DeviceBuffer<char> blas_scratch;
  cublasHandle_t blas = nullptr;
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() {
    if (blas) cublasDestroy(blas);
  }
};

// Sums the slices of every output and applies the epilogue (C may alias D: each element is read
// before it is written, by the same thread).
__global__ void split_k_reduce(Problem p, const float* partial, int slices) {
  const std::int64_t mn = std::int64_t{p.m} * p.n;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < mn; i += std::int64_t{gridDim.x} * blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < slices; ++s) acc += partial[s * mn + i];
    const int m = static_cast<int>(i / p.n), n = static_cast<int>(i % p.n);
    p.d[std::int64_t{m} * p.ldd + n] = Runtime::apply(p, acc, m, n);
  }
}

// ---- the dispatcher -------------------------------------------------------------------------------

enum class Path { naive, tiled, split_k };

struct Plan {
  Path path;
  int slices;
};

constexpr double kNaiveBelow = 1 << 18;  // M*N*K: launch-bound either way, and naive needs no tile setup

// Tiny problems go to the naive kernel; problems with at least one Tuned tile per SM to the tiled
// kernel; the rest (skinny or small) split K so that ~4 SplitCfg blocks per SM have work, each
// slice at least 256 deep.
inline Plan plan(int m, int n, int k, int sms) {
  if (static_cast<double>(m) * n * k <= kNaiveBelow) return {Path::naive, 1};
  const std::int64_t tiles = std::int64_t{(m + Tuned::BM - 1) / Tuned::BM} * ((n + Tuned::BN - 1) / Tuned::BN);
  if (tiles >= sms) return {Path::tiled, 1};
  const std::int64_t split_tiles = std::int64_t{(m + SplitCfg::BM - 1) / SplitCfg::BM} * ((n + SplitCfg::BN - 1) / SplitCfg::BN);
  const int want = static_cast<int>((4 * sms + split_tiles - 1) / split_tiles);
  const int slices = std::max(1, std::min({want, k / 256, 16}));
  return {slices > 1 ? Path::split_k : Path::tiled, slices};
}

// K slices of a multiple of bk, so every slice but the last is whole tiles.
inline int slice_depth(int k, int slices, int bk) {
  const int per = (k + slices - 1) / slices;
  return (per + bk - 1) / bk * bk;
}

// Split-K with tiles Cfg: raw slice sums into the workspace, then split_k_reduce applies the epilogue.
template <class Cfg>
void launch_split_k(const Problem& p, int slices, Workspace& ws, cudaStream_t s) {
  const std::int64_t mn = std::int64_t{p.m} * p.n;
  ws.partial.resize(static_cast<std::size_t>(mn * slices));
  Problem part = p;  // raw sums: alpha 1, no C, no bias, no activation, rows of length N
  part.d = ws.partial.data();
  part.ldd = p.n;
  part.alpha = 1.f;
  part.beta = 0.f;
  part.c = nullptr;
  part.bias_kind = Bias::none;
  part.act = Act::none;
  const int depth = slice_depth(p.k, slices, Cfg::BK);
  const int used = (p.k + depth - 1) / depth;
  gemm_warp_tiled<Cfg, Fused<Bias::none, Act::none, false>>
      <<<tile_grid(p, Cfg::BM, Cfg::BN, used), Cfg::kThreads, 0, s>>>(part, depth, mn);
  CUDA_CHECK_LAUNCH();
  const int blocks = static_cast<int>(std::min<std::int64_t>((mn + 255) / 256, 8 * kl::sm_count()));
  split_k_reduce<<<blocks, 256, 0, s>>>(p, ws.partial.data(), used);
  CUDA_CHECK_LAUNCH();
}

// The fused kernel for whatever the plan says, with the problem's epilogue.
inline void launch_fused(const Problem& p, Workspace& ws, cudaStream_t s) {
  const Plan pl = plan(p.m, p.n, p.k, kl::sm_count());
  if (pl.path == Path::naive) launch_naive(p, s);
  else if (pl.path == Path::split_k) launch_split_k<SplitCfg>(p, pl.slices, ws, s);
  else with_epilogue(p, [&](auto epi) { launch_warp_tiled<Tuned, decltype(epi)>(p, s); });
}

// ---- tuning step 6 (lesson06 --tune) ----------------------------------------------------------------

// The candidates `--tune` times at a shape, each with K split into 1, 2, 4 or 8 slices (D = A B, no
// epilogue; slices > 1 add the reduction kernel). Tuned and SplitCfg above are the winners.
template <class Cfg>
void launch_candidate(const Problem& p, int slices, Workspace& ws, cudaStream_t s) {
  if (slices == 1) launch_warp_tiled<Cfg, Fused<Bias::none, Act::none, false>>(p, s);
  else launch_split_k<Cfg>(p, slices, ws, s);
}

struct Candidate {
  const char* name;
  int threads;
  void (*launch)(const Problem& p, int slices, Workspace& ws, cudaStream_t s);
};

inline constexpr Candidate kCandidates[] = {
    {"128x128x8", Config<128, 128, 8>::kThreads, launch_candidate<Config<128, 128, 8>>},
    {"128x128x16", Config<128, 128, 16>::kThreads, launch_candidate<Config<128, 128, 16>>},
    {"64x128x8", Config<64, 128, 8>::kThreads, launch_candidate<Config<64, 128, 8>>},
    {"128x64x8", Config<128, 64, 8>::kThreads, launch_candidate<Config<128, 64, 8>>},
    {"128x64x16", Config<128, 64, 16>::kThreads, launch_candidate<Config<128, 64, 16>>},
    {"64x64x16", Config<64, 64, 16>::kThreads, launch_candidate<Config<64, 64, 16>>},
};

// ---- the library baselines ------------------------------------------------------------------------

inline void blas_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(st));
}

// The handle, made on first use with the default (IEEE FP32, no TF32) math mode and a fixed
// workspace, so that a captured call allocates nothing.
inline cublasHandle_t blas_handle(Workspace& ws) {
  if (!ws.blas) {
    blas_check(cublasCreate(&ws.blas), "cublasCreate");
    blas_check(cublasSetMathMode(ws.blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    ws.blas_scratch.resize(std::size_t{32} << 20);
    blas_check(cublasSetWorkspace(ws.blas, ws.blas_scratch.data(), ws.blas_scratch.size()), "cublasSetWorkspace");
  }
  return ws.blas;
}

// cuBLAS is column-major: row-major D = A B is column-major D^T = B^T A^T, i.e. sgemm(B, A). cuBLAS
// writes its result over C, so C is first copied to D when they differ (and beta != 0).
inline void launch_cublas(const Problem& p, Workspace& ws, cudaStream_t s) {
  const cublasHandle_t h = blas_handle(ws);
  blas_check(cublasSetStream(h, s), "cublasSetStream");
  if (p.beta != 0.f && p.c != p.d)
    CUDA_CHECK(cudaMemcpy2DAsync(p.d, p.ldd * sizeof(float), p.c, p.ldc * sizeof(float), p.n * sizeof(float), p.m,
                                 cudaMemcpyDeviceToDevice, s));
  blas_check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &p.alpha, p.b, p.ldb, p.a, p.lda, &p.beta, p.d, p.ldd),
             "cublasSgemm");
}

// The unfused epilogue: a second pass over D adds the bias and applies the activation.
__global__ void bias_activation(Problem p) {
  const std::int64_t mn = std::int64_t{p.m} * p.n;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < mn; i += std::int64_t{gridDim.x} * blockDim.x) {
    const int m = static_cast<int>(i / p.n), n = static_cast<int>(i % p.n);
    float* d = p.d + std::int64_t{m} * p.ldd + n;
    *d = Runtime::apply(p, *d, m, n);
  }
}

inline void launch_cublas_epilogue(const Problem& p, Workspace& ws, cudaStream_t s) {
  launch_cublas(plain(p), ws, s);
  Problem e = p;  // act(D + bias): alpha 1, no C
  e.alpha = 1.f;
  e.beta = 0.f;
  const std::int64_t mn = std::int64_t{p.m} * p.n;
  bias_activation<<<static_cast<int>(std::min<std::int64_t>((mn + 255) / 256, 8 * kl::sm_count())), 256, 0, s>>>(e);
  CUDA_CHECK_LAUNCH();
}

// ---- the table of steps ---------------------------------------------------------------------------

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);

template <void (*L)(const Problem&, cudaStream_t)>
void plain_step(const Problem& p, Workspace&, cudaStream_t s) {
  L(plain(p), s);
}

inline void launch_tuned(const Problem& p, Workspace& ws, cudaStream_t s) { launch_fused(plain(p), ws, s); }

struct GemmStep {
  const char* name;
  const char* idea;
  Launcher launch;
  bool library;
  bool epilogue;  // computes bias and activation too (else alpha*AB + beta*C only)
};

inline constexpr GemmStep kSteps[] = {
    {"naive", "one thread per D element, A and B from global memory", plain_step<launch_naive>, false, false},
    {"smem_tiles", "32x32 shared-memory tiles, coalesced loads", plain_step<launch_smem_tiles>, false, false},
    {"register_tile", "128x128x8 block tile, 8x8 outputs per thread as outer products", plain_step<launch_register_tile>,
     false, false},
    {"vector", "16-byte loads, A transposed + padded in shared memory", plain_step<launch_vector>, false, false},
    {"double_buffer", "two shared-memory stages: next tile's loads overlap this tile's FMAs", plain_step<launch_double_buffer>,
     false, false},
    {"warp_tiled", "32x64 warp tiles of 4x4 quadrants (conflict-free reads), tuned tiles, split-K", launch_tuned, false,
     false},
    {"fused_epilogue", "step 6 + bias and activation in the kernel (template per epilogue)", launch_fused, false, true},
    {"cublas", "cublasSgemm, FP32 (no TF32)", launch_cublas, true, false},
    {"cublas+epilogue", "cublasSgemm + a bias/activation kernel (unfused)", launch_cublas_epilogue, true, true},
};

inline constexpr int kFusedStep = 7;

inline std::string step_label(int i) { return kSteps[i].library ? "lib" : std::to_string(i + 1); }

// Runs a step: validates first (no launch on bad input); M, N or K = 0 launches nothing.
inline void run_step(const GemmStep& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p);
  if (p.m == 0 || p.n == 0 || p.k == 0) return;
  st.launch(p, ws, s);
}

// The public API: D = act(alpha A B + beta C + bias) through the dispatcher (step 7).
inline void gemm(const Problem& p, Workspace& ws, cudaStream_t s = nullptr) { run_step(kSteps[kFusedStep - 1], p, ws, s); }

// ---- the float64 reference ------------------------------------------------------------------------

// A*B and |A|*|B| in float64 (the second scales the error: a float32 dot product of K terms can be
// off by up to ~K eps of sum |a b|).
struct Reference {
  std::vector<double> ab, abs_ab;
};

inline Reference reference_cpu(const float* a, int lda, const float* b, int ldb, int m, int n, int k) {
  Reference r{std::vector<double>(std::size_t(m) * n), std::vector<double>(std::size_t(m) * n)};
  kl::parallel_for(m, [&](std::size_t i0, std::size_t i1) {
    std::vector<double> row(n), abs_row(n);
    for (std::size_t i = i0; i < i1; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      std::fill(abs_row.begin(), abs_row.end(), 0.0);
      for (int kk = 0; kk < k; ++kk) {
        const double av = a[i * lda + kk];
        const float* brow = b + std::size_t(kk) * ldb;
        for (int j = 0; j < n; ++j) {
          row[j] += av * brow[j];
          abs_row[j] += std::fabs(av * brow[j]);
        }
      }
      std::copy(row.begin(), row.end(), r.ab.begin() + i * n);
      std::copy(abs_row.begin(), abs_row.end(), r.abs_ab.begin() + i * n);
    }
  });
  return r;
}

// The same on the GPU with cublasDgemm, for shapes too large for the CPU.
inline Reference reference_gpu(const float* a, int lda, const float* b, int ldb, int m, int n, int k, Workspace& ws) {
  const auto widen = [](const float* x, int rows, int cols, int ld, bool absolute) {
    std::vector<double> v(std::size_t(rows) * cols);
    kl::parallel_for(rows, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r)
        for (int c = 0; c < cols; ++c) {
          const double x64 = x[r * ld + c];
          v[r * cols + c] = absolute ? std::fabs(x64) : x64;
        }
    });
    return v;
  };
  const cublasHandle_t h = blas_handle(ws);
  blas_check(cublasSetStream(h, nullptr), "cublasSetStream");
  Reference r;
  kl::DeviceBuffer<double> out(std::size_t(m) * n);
  for (bool absolute : {false, true}) {
    const kl::DeviceBuffer<double> da(widen(a, m, k, lda, absolute)), db(widen(b, k, n, ldb, absolute));
    const double one = 1.0, zero = 0.0;
    blas_check(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, db.data(), n, da.data(), k, &zero, out.data(), n),
               "cublasDgemm");
    (absolute ? r.abs_ab : r.ab) = out.download(std::size_t(m) * n);
  }
  return r;
}

constexpr double kCpuReferenceBelow = 1 << 25;  // M*N*K: above this the float64 product runs on the GPU

inline Reference reference(const float* a, int lda, const float* b, int ldb, int m, int n, int k, Workspace& ws) {
  if (static_cast<double>(m) * n * k <= kCpuReferenceBelow) return reference_cpu(a, lda, b, ldb, m, n, k);
  return reference_gpu(a, lda, b, ldb, m, n, k, ws);
}

inline double activate_ref(Act act, double x, double slope) {
  switch (act) {
    case Act::relu: return x < 0 ? 0.0 : x;
    case Act::leaky: return x < 0 ? slope * x : x;
    case Act::gelu_tanh: return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Act::gelu_erf: return 0.5 * x * (1.0 + std::erf(x * 0.7071067811865476));
    default: return x;
  }
}

// The host inputs of one check (C and bias may be empty when unused), laid out as p says.
struct HostInputs {
  std::vector<float> c, bias;
};

// Largest error of d (rows of p.ldd) against the reference, each element relative to the scale of
// its terms, |alpha| sum|a b| + |beta c| + |bias|; NaN and inf must match exactly.
inline double max_error(const std::vector<float>& d, const Problem& p, const Reference& ref, const HostInputs& in) {
  std::vector<double> worst(std::max(p.m, 1), 0.0);
  kl::parallel_for(p.m, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      for (int j = 0; j < p.n; ++j) {
        const std::size_t e = i * p.n + j;
        double v = double(p.alpha) * ref.ab[e], scale = std::fabs(double(p.alpha)) * ref.abs_ab[e];
        if (p.beta != 0.f) {
          const double c = double(p.beta) * in.c[i * p.ldc + j];
          v += c;
          scale += std::fabs(c);
        }
        double bias = 0;
        if (p.bias_kind == Bias::m) bias = in.bias[i];
        else if (p.bias_kind == Bias::n) bias = in.bias[j];
        else if (p.bias_kind == Bias::full) bias = in.bias[e];
        v += bias;
        scale += std::fabs(bias);
        const double want = activate_ref(p.act, v, p.slope);
        worst[i] = std::max(worst[i], kl::scaled_error(d[i * p.ldd + j], want, scale + 1e-30));
      }
    }
  });
  return *std::max_element(worst.begin(), worst.end());
}

// Rounding errors of a float32 dot product of K terms: at most ~K eps of sum|a b| in the worst case;
// in practice they grow like sqrt(K) (see kl::sum_tolerance), so we allow min(K, 16 sqrt(K)) eps, plus
// a few eps for alpha, beta, the bias and the activation.
inline double tolerance(int k) {
  const double eps = 1.1920928955078125e-07;
  return (std::min<double>(k, 16.0 * std::sqrt(static_cast<double>(k))) + 8.0) * eps;
}

// ---- shapes ---------------------------------------------------------------------------------------

struct Shape {
  int m, n, k;
};

constexpr Shape kDefaultShape{4096, 4096, 4096};

// --sweep: squares 256 ... 8192 and the awkward shapes (odd sizes, a skinny N).
inline std::vector<Shape> sweep_shapes() {
  std::vector<Shape> v;
  for (int s = 256; s <= 8192; s *= 2) v.push_back({s, s, s});
  v.push_back({4097, 4097, 4097});
  v.push_back({1000, 3000, 777});
  v.push_back({8192, 64, 8192});
  return v;
}

inline Bias parse_bias(const std::string& s) {
  for (Bias b : {Bias::none, Bias::m, Bias::n, Bias::full})
    if (s == bias_name(b)) return b;
  throw kl::UsageError("--bias must be one of none, m, n, full (got '" + s + "')");
}

inline Act parse_act(const std::string& s) {
  for (Act a : {Act::none, Act::relu, Act::leaky, Act::gelu_tanh, Act::gelu_erf})
    if (s == act_name(a)) return a;
  throw kl::UsageError("--act must be one of none, relu, leaky, gelu_tanh, gelu_erf (got '" + s + "')");
}

}  // namespace lesson06
