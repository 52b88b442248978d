// Lesson 06 — tiled SGEMM with double buffering and a fused epilogue:
//   D = act(alpha · A·B + beta · C + bias),  A [M, K], B [K, N], C and D [M, N], float32, row-major
// with leading dimensions. Steps 1-6 compute the GEMM part (alpha · A·B + beta · C); step 7 adds the
// bias and the activation inside the same kernel. The pieces the steps share (problem, epilogue,
// tile loader, float64 reference) are in tiles.cuh. main.cu and test.cu walk kSteps (near the end
// of this file), so a new step is benchmarked and tested by adding one entry.
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
#include "lessons/06_tiled_gemm/tiles.cuh"

namespace lesson06 {

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

inline void launch_register_tile(const Problem& p, cudaStream_t s) {
  gemm_register_tile<<<tile_grid(p, kBM, kBN), kThreads, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// ---- steps 4-5: 16-byte loads, A transposed (TileLoader in tiles.cuh); double buffering ---------

// Step 4: 16-byte global loads, A transposed so each thread reads its 8 A values as two float4
// (step 3: 8 single reads), and 16-byte stores of D. Load, barrier, compute, barrier: one stage.
__global__ void __launch_bounds__(kThreads, 2) gemm_vector(Problem p) {
  __shared__ __align__(16) float as[kBK * Loader128::kLdA];
  __shared__ __align__(16) float bs[kBK * Loader128::kLdB];
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  Loader128 tile;
  tile.start(p, m0, n0, 0);
  float acc[8][8] = {};
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    tile.load(p, p.k);
    tile.store(as, bs);
    __syncthreads();
    compute_split(acc, as, bs);
    __syncthreads();
  }
  store_split<Runtime>(p, acc, m0, n0);
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
  Loader128 tile;
  tile.start(p, m0, n0, 0);
  float acc[8][8] = {};
  tile.load(p, p.k);
  tile.store(as[0], bs[0]);
  __syncthreads();
  int stage = 0;
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
    const bool more = k0 + kBK < p.k;
    if (more) tile.load(p, p.k);
    compute_split(acc, as[stage], bs[stage]);
    if (more) tile.store(as[stage ^ 1], bs[stage ^ 1]);
    __syncthreads();
    stage ^= 1;
  }
  store_split<Runtime>(p, acc, m0, n0);
}

inline void launch_double_buffer(const Problem& p, cudaStream_t s) {
  gemm_double_buffer<<<tile_grid(p, kBM, kBN), kThreads, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

// ---- step 6: warp tiling, a 3-stage cp.async pipeline, tuned tile sizes ----------------------------

// cp.async copies global memory to shared memory without passing through registers; `bytes` below
// the copy's size fill the rest with zeros (0: nothing is read). A thread's copies are committed as
// one group per tile, and wait_group<N> waits until at most N of its groups are still in flight.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Copies one BMxBK tile of A and one BKxBN tile of B straight into a shared-memory stage, walking K
// from start(). A is transposed on the way (as[k][m], rows padded by 4 floats) by 4-byte copies whose
// lanes walk k (one 32-byte sector per row of A in global memory); B goes in 16-byte copies (4-byte
// ones where B's rows are not 16-byte aligned). Zero-fill past the edges, so tails stay in the kernel.
template <int BM, int BN, int BK, int Threads>
struct AsyncTileLoader {
  static constexpr int kLdA = BM + 4, kLdB = BN;
  static constexpr int kRowsA = Threads / BK, kA = BM / kRowsA;          // A: kA copies of 4 bytes
  static constexpr int kRowsB = Threads / (BN / 4), kB = BK / kRowsB;    // B: kB copies of 16 bytes
  static_assert(kRowsA * BK == Threads && kA * kRowsA == BM && kRowsB * (BN / 4) == Threads && kB * kRowsB == BK, "tile/threads");
  const float* pa;  // A[m0 + ra][k + ka]
  const float* pb;  // B[k + rb][n0 + cb]
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
      cp_async4(as + ka * kLdA + ra + i * kRowsA, in ? pa + i * a_step : p.a, in ? 4 : 0);
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      const bool row_in = k + rb + i * kRowsB < k_end;
      const float* src = pb + i * b_step;
      float* dst = bs + (rb + i * kRowsB) * kLdB + cb;
      if (vec_b) {
        const int bytes = row_in ? 4 * max(0, min(4, n_left - cb)) : 0;
        cp_async16(dst, bytes ? src : p.b, bytes);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const bool in = row_in && cb + j < n_left;
          cp_async4(dst + j, in ? src + j : p.b, in ? 4 : 0);
        }
      }
    }
    pa += BK;
    pb += std::int64_t{BK} * p.ldb;
    k += BK;
  }
};

// A block tile BM x BN x BK made of (16 Q) x 64 warp tiles: in a warp, lane (lm, ln) = (lane / 8,
// lane % 8) owns 2Q quadrants of 4x4, rows lm*4 + 16 q (q < Q) and columns ln*4 + {0, 32}: a thread
// tile of 4Q x 8. Q = 2: 64 accumulators; Q = 4: 128, one block an SM of up to 255 registers (what
// cuBLAS's FP32 kernel does), half the shared reads per FMA. S shared-memory stages.
template <int BM_, int BN_, int BK_, int Q_ = 2, int S_ = 3>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, Q = Q_, S = S_;
  static constexpr int kWarpsN = BN / 64, kThreads = BM / (16 * Q) * kWarpsN * 32;
  // Q = 2: 512 threads a block or 2 blocks of 256 an SM (<= 128 registers); smaller blocks: <= 170.
  static constexpr int kMinBlocks = Q == 4 ? 1 : kThreads >= 256 ? 512 / kThreads : 384 / kThreads;
  using Loader = AsyncTileLoader<BM, BN, BK, kThreads>;
  static constexpr int kStageFloats = BK * (Loader::kLdA + Loader::kLdB);  // one stage: A^T tile, then B tile
  static constexpr int kSmemBytes = S * kStageFloats * 4;
};

// The configuration steps 6 and 7 use on the H100 (the README's tuning table; main.cu's `--tune`):
// 16 warps of 32x64, 8x8 a thread, three stages of 16-deep tiles (72 KB).
using Tuned = Config<128, 256, 16>;
// Few output tiles, or rows of A or B not 16-byte aligned: smaller tiles, three blocks an SM, with K
// split over slices when there are few of them.
using SplitCfg = Config<128, 64, 16>;

// One k of a thread's fragments from a stage: Q float4 of A (rows wm + 16q) and 2 float4 of B
// (columns wn and wn + 32).
template <class Cfg>
__device__ __forceinline__ void load_fragments(float4 (&a)[Cfg::Q], float4 (&b)[2], const float* stage, int kk, int wm, int wn) {
  const float* as = stage + kk * Cfg::Loader::kLdA + wm;
  const float* bs = stage + Cfg::BK * Cfg::Loader::kLdA + kk * Cfg::Loader::kLdB + wn;
#pragma unroll
  for (int q = 0; q < Cfg::Q; ++q) a[q] = *reinterpret_cast<const float4*>(as + 16 * q);
  b[0] = *reinterpret_cast<const float4*>(bs);
  b[1] = *reinterpret_cast<const float4*>(bs + 32);
}

// Step 6: lanes read A and B values that sit side by side (32 and 64 consecutive floats per warp),
// so each 16-byte shared read of a warp is one conflict-free wavefront (steps 4-5: two). Tiles
// arrive by cp.async S stages deep, with no staging registers or instructions among the FMAs, and
// the fragments of k+1 are read while the FMAs of k run (across the barrier too), so no FMA waits
// for shared memory. blockIdx.z selects a K slice [z*k_slice, (z+1)*k_slice) written to
// d + z*slice_stride.
template <class Cfg, class Epi>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    gemm_warp_tiled(Problem p, int k_slice, std::int64_t slice_stride) {
  static_assert(Cfg::BK % 2 == 0, "fragments alternate between two register sets");
  extern __shared__ __align__(16) float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / Cfg::kWarpsN * 16 * Cfg::Q + lane / 8 * 4, wn = warp % Cfg::kWarpsN * 64 + lane % 8 * 4;
  const int m0 = blockIdx.y * Cfg::BM, n0 = blockIdx.x * Cfg::BN;
  const int k_begin = blockIdx.z * k_slice, k_end = min(p.k, k_begin + k_slice);
  const int tiles = (k_end - k_begin + Cfg::BK - 1) / Cfg::BK;
  typename Cfg::Loader tile;
  tile.start(p, m0, n0, k_begin);
#pragma unroll
  for (int s = 0; s < Cfg::S; ++s) {  // tiles 0 .. S-1 in flight, one commit group each
    if (s < tiles) tile.copy(p, k_end, smem + s * Cfg::kStageFloats, smem + s * Cfg::kStageFloats + Cfg::BK * Cfg::Loader::kLdA);
    cp_async_commit();
  }
  cp_async_wait<Cfg::S - 1>();
  __syncthreads();
  float acc[4 * Cfg::Q][8] = {};
  float4 a[2][Cfg::Q], b[2][2];
  load_fragments<Cfg>(a[0], b[0], smem, 0, wm, wn);
  int stage = 0;
  for (int t = 0; t < tiles; ++t) {
    const int next = stage == Cfg::S - 1 ? 0 : stage + 1;
#pragma unroll
    for (int kk = 0; kk < Cfg::BK; ++kk) {
      if (kk < Cfg::BK - 1) {
        load_fragments<Cfg>(a[(kk + 1) % 2], b[(kk + 1) % 2], smem + stage * Cfg::kStageFloats, kk + 1, wm, wn);
      } else {
        cp_async_wait<Cfg::S - 2>();  // this thread's copies of tile t+1 have landed ...
        __syncthreads();              // ... everyone's have, and no warp reads tile t's stage any more
        float* free = smem + stage * Cfg::kStageFloats;
        if (t + Cfg::S < tiles) tile.copy(p, k_end, free, free + Cfg::BK * Cfg::Loader::kLdA);
        cp_async_commit();
        if (t + 1 < tiles) load_fragments<Cfg>(a[0], b[0], smem + next * Cfg::kStageFloats, 0, wm, wn);
      }
      outer<Cfg::Q>(acc, a[kk % 2], b[kk % 2][0], b[kk % 2][1]);
    }
    stage = next;
  }
  float* d = p.d + blockIdx.z * slice_stride;
  const bool vec_d = aligned16(d, p.ldd);
#pragma unroll
  for (int i = 0; i < 4 * Cfg::Q; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      store4<Epi>(p, d, vec_d, m0 + wm + i % 4 + 16 * (i / 4), n0 + wn + 32 * h,
                  make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]));
}

// Launches gemm_warp_tiled over `slices` K slices of `depth`; shared memory is dynamic, and a kernel
// that needs more than 48 KB asks for it once.
template <class Cfg, class Epi>
void launch_warp_tiled(const Problem& p, cudaStream_t s, int slices = 1, int depth = 0, std::int64_t slice_stride = 0) {
  static const bool opted_in = Cfg::kSmemBytes <= (48 << 10) ||
      cudaFuncSetAttribute(gemm_warp_tiled<Cfg, Epi>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) == cudaSuccess;
  if (!opted_in) throw std::runtime_error("cudaFuncSetAttribute: the tile needs more shared memory than the device has");
  gemm_warp_tiled<Cfg, Epi><<<tile_grid(p, Cfg::BM, Cfg::BN, slices), Cfg::kThreads, Cfg::kSmemBytes, s>>>(p, depth > 0 ? depth : p.k, slice_stride);
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

enum class Path { naive, tiled, unaligned, small_tiles, split_k };

struct Plan {
  Path path;
  int slices;
};

constexpr double kNaiveBelow = 1 << 25;  // M*N*K: launch-bound either way, and naive needs no tile setup

// Tiny problems go to the naive kernel; problems with about one Tuned tile per SM (one block an SM)
// to the tuned kernel, or, when A's or B's rows are not 16-byte aligned (K or N not a multiple of 4),
// to SplitCfg's smaller tiles, which hide the slower 4-byte copies better; the rest to SplitCfg's
// tiles too, with K split so that about two of them per SM have work, each slice at least 256 deep
// (one slice when K is too short to split: small_tiles).
inline Plan plan(int m, int n, int k, int sms, bool aligned = true) {
  if (static_cast<double>(m) * n * k <= kNaiveBelow) return {Path::naive, 1};
  const std::int64_t tiles = std::int64_t{(m + Tuned::BM - 1) / Tuned::BM} * ((n + Tuned::BN - 1) / Tuned::BN);
  if (10 * tiles >= 9 * sms) return {aligned ? Path::tiled : Path::unaligned, 1};
  const std::int64_t split_tiles = std::int64_t{(m + SplitCfg::BM - 1) / SplitCfg::BM} * ((n + SplitCfg::BN - 1) / SplitCfg::BN);
  const int slices = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>({2 * sms / split_tiles, k / 256, 16})));
  return {slices > 1 ? Path::split_k : Path::small_tiles, slices};
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
  launch_warp_tiled<Cfg, Fused<Bias::none, Act::none, false>>(part, s, used, depth, mn);
  const int blocks = static_cast<int>(std::min<std::int64_t>((mn + 255) / 256, 8 * kl::sm_count()));
  split_k_reduce<<<blocks, 256, 0, s>>>(p, ws.partial.data(), used);
  CUDA_CHECK_LAUNCH();
}

// Off the tuned path: the compiled kernel for a plain GEMM (step 6), the run-time epilogue otherwise
// (one kernel per tile shape instead of 40).
template <class Cfg>
void launch_plain_or_runtime(const Problem& p, cudaStream_t s) {
  if (p.beta == 0.f && p.bias_kind == Bias::none && p.act == Act::none) launch_warp_tiled<Cfg, Fused<Bias::none, Act::none, false>>(p, s);
  else launch_warp_tiled<Cfg, Runtime>(p, s);
}

// The fused kernel for whatever the plan says, with the problem's epilogue.
inline void launch_fused(const Problem& p, Workspace& ws, cudaStream_t s) {
  const Plan pl = plan(p.m, p.n, p.k, kl::sm_count(), aligned16(p.a, p.lda) && aligned16(p.b, p.ldb));
  if (pl.path == Path::naive) launch_naive(p, s);
  else if (pl.path == Path::split_k) launch_split_k<SplitCfg>(p, pl.slices, ws, s);
  else if (pl.path == Path::unaligned || pl.path == Path::small_tiles) launch_plain_or_runtime<SplitCfg>(p, s);
  else with_epilogue(p, [&](auto epi) { launch_warp_tiled<Tuned, decltype(epi)>(p, s); });
}

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
    {"register_tile", "128x128x16 block tile, 8x8 outputs per thread as outer products", plain_step<launch_register_tile>,
     false, false},
    {"vector", "16-byte loads, A transposed + padded in shared memory", plain_step<launch_vector>, false, false},
    {"double_buffer", "two shared-memory stages: next tile's loads overlap this tile's FMAs", plain_step<launch_double_buffer>,
     false, false},
    {"warp_tiled", "warp tiles of 4x4 quadrants, 3-stage cp.async, fragments read ahead, tuned 128x256x16 tiles, 8x8 a thread",
     launch_tuned, false, false},
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

// ---- the float64 reference on the GPU -------------------------------------------------------------

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
