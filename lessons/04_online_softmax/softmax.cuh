// Lesson 04 — online softmax: y[r, :] = softmax(x[r, :] * scale) for every row r of an [M, K] matrix,
// in f32, f16 or bf16 (loads in the input type, arithmetic in float, stores in the input type).
// The steps climb from three naive kernels to one that reads every element once and writes it
// once at any row length; every step shares one launcher signature, so main.cu and test.cu walk
// one table of steps (kSteps, at the end of this file).
#pragma once
#include <cooperative_groups.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/block.cuh"
#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/pack.cuh"
#include "common/parallel.hpp"
#include "common/warp.cuh"

namespace lesson04 {

// ---- the problem ----------------------------------------------------------------------------------

// The element types (Dtype, dtype_of, with_type, ...) live in common/pack.cuh.
using kl::Dtype;
using kl::dtype_bytes;
using kl::dtype_name;
using kl::dtype_of;
using kl::parse_dtype;
using kl::with_type;

// One softmax call: x and y point at rows x cols elements of dtype, row after row.
struct Problem {
  const void* x = nullptr;
  void* y = nullptr;
  std::int64_t rows = 0, cols = 0;
  Dtype dtype = Dtype::f32;
  float scale = 1.f;  // softmax(x * scale): attention passes 1/sqrt(d) here
};

// Nothing to do, so nothing is launched.
inline bool empty(const Problem& p) { return p.rows <= 0 || p.cols <= 0; }

// What a step needs to know about the GPU to say whether it can handle a shape.
struct DeviceCaps {
  int cc_major = 0, cc_minor = 0;
  std::size_t smem_optin = 0;  // the most shared memory one block may ask for
};

inline const DeviceCaps& device_caps() {
  static const DeviceCaps caps = [] {
    const kl::DeviceInfo d = kl::device_info();
    return DeviceCaps{d.cc_major, d.cc_minor, d.smem_per_block_optin};
  }();
  return caps;
}

// Shared memory a block may fill with row data: the opt-in limit less a little for the block
// reduction's own (static) shared arrays.
inline std::size_t row_smem_bytes(const DeviceCaps& c) { return c.smem_optin - 1024; }

// A step that turns a shape down at run time (the library may): the driver shows it as n/a.
struct NotSupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Scratch a step may need: step 1's per-row statistics, the library's handle.
struct Workspace {
  kl::DeviceBuffer<float> stats;
  cudnnHandle_t cudnn = nullptr;
  Workspace() = default;
  ~Workspace() {
    if (cudnn) cudnnDestroy(cudnn);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

// ---- the float64 reference ------------------------------------------------------------------------

// Softmax of each row of x * scale in double. A row holding NaN or +inf, or only -inf, comes out all
// NaN (x - max is NaN somewhere): the same choice PyTorch makes, and what every step must give.
// Rows are independent, so the CPU's cores take a share of rows each (same result on any core count).
inline std::vector<double> ref_softmax(const std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                                       double scale = 1.0) {
  std::vector<double> y(x.size());
  kl::parallel_for(static_cast<std::size_t>(rows), [&](std::size_t r0, std::size_t r1) {
    for (auto r = static_cast<std::int64_t>(r0); r < static_cast<std::int64_t>(r1); ++r) {
      const float* xr = x.data() + r * cols;
      double* yr = y.data() + r * cols;
      double m = -INFINITY;
      for (std::int64_t c = 0; c < cols; ++c) {
        const double t = xr[c] * scale;
        m = (std::isnan(m) || t <= m) ? m : t;  // a NaN stays the max
      }
      double s = 0;
      for (std::int64_t c = 0; c < cols; ++c) s += yr[c] = std::exp(xr[c] * scale - m);
      for (std::int64_t c = 0; c < cols; ++c) yr[c] /= s;
    }
  });
  return y;
}

// A result y is right when |y - ref| <= rel * |ref| + abs for every element (NaN exactly where the
// reference is NaN). rel covers the rounding of the stored type; abs covers results too small for
// it: f16's subnormal spacing 2^-24, and for f32/bf16 the flush of e^x below 2^-126 to zero.
struct Tolerance {
  double rel, abs;
};

inline Tolerance tolerance(Dtype d) {
  if (d == Dtype::f32) return {1e-4, 1e-30};
  if (d == Dtype::f16) return {0x1p-10, 0x1p-24};
  return {0x1p-7, 1e-30};
}

// max |y - ref| / (|ref| + abs / rel): the relative error, with a floor for tiny results. The check
// passes when it is at most tol.rel; a NaN mismatch is an infinite error. y holds the step's output
// in its own type (float, __half, __nv_bfloat16); blocks of 2^16 elements go to the CPU's cores,
// and the max of the blocks' maxima does not depend on which core took which.
template <class T>
double max_error(const std::vector<T>& y, const std::vector<double>& ref, Tolerance tol) {
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  std::vector<double> worst((ref.size() + kBlock - 1) / kBlock, 0.0);
  kl::parallel_for(worst.size(), [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      for (std::size_t i = b * kBlock; i < std::min(ref.size(), (b + 1) * kBlock); ++i) {
        const double got = kl::to_float(y[i]);
        if (std::isnan(ref[i]) || std::isnan(got)) {
          if (std::isnan(ref[i]) != std::isnan(got)) worst[b] = INFINITY;
          continue;
        }
        worst[b] = std::max(worst[b], std::fabs(got - ref[i]) / (std::fabs(ref[i]) + tol.abs / tol.rel));
      }
    }
  });
  double all = 0;
  for (double w : worst) all = std::max(all, w);
  return all;
}

// ---- pieces every step uses -----------------------------------------------------------------------

// Max that keeps a NaN (fmaxf would drop it): a NaN anywhere in a row must reach every output.
__host__ __device__ inline float max_nan(float a, float b) { return (a != a || a > b) ? a : b; }

// e^x. On the GPU, __expf: one multiply by log2(e) and the SFU's ex2.approx, about 2 instructions
// instead of ~10 for expf. Its relative error is about 2^-22 plus |x| * 2^-24 (the rounding of
// x * log2(e)), so at most ~1e-5 for the x in [-87, 0] that softmax feeds it; results below 2^-126
// flush to 0. Step 1 uses expf; README § "__expf" has the measured difference.
__host__ __device__ inline float fast_exp(float x) {
#ifdef __CUDA_ARCH__
  return __expf(x);
#else
  return std::exp(x);
#endif
}

// The online softmax state of a part of a row: its max m, and s = sum of e^(x - m) over the part.
struct MaxSum {
  float m, s;
};

// Two parts merged: the new max is the larger one, and each sum is rescaled to it,
//   m = max(m1, m2),  s = s1 e^(m1 - m) + s2 e^(m2 - m)
// because e^(x - m1) e^(m1 - m) = e^(x - m). A part that has seen no finite value is (-inf, 0) and
// adds nothing: its term is written as 0, since 0 * e^(-inf - -inf) would be NaN.
__host__ __device__ inline MaxSum combine(MaxSum a, MaxSum b) {
  const float m = max_nan(a.m, b.m);
  const float sa = a.m == -INFINITY ? 0.f : a.s * fast_exp(a.m - m);
  const float sb = b.m == -INFINITY ? 0.f : b.s * fast_exp(b.m - m);
  return {m, sa + sb};
}

// The (max, sum) of a few values held by one thread.
template <int N>
__device__ __forceinline__ MaxSum pack_stats(const float (&v)[N]) {
  float m = v[0];
#pragma unroll
  for (int i = 1; i < N; ++i) m = max_nan(m, v[i]);
  if (m == -INFINITY) return {m, 0.f};
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += fast_exp(v[i] - m);
  return {m, s};
}

template <int N>
__device__ __forceinline__ void scale_all(float (&v)[N], float scale) {
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] *= scale;
}

// kl::warp_allreduce for groups of `lanes` neighbouring lanes (a power of two, at most 32): each
// group reduces its own row, all groups in the same five (or fewer) shuffles.
template <class Op>
__device__ __forceinline__ float group_allreduce(float v, int lanes) {
  for (int offset = lanes / 2; offset > 0; offset /= 2) v = Op::combine(v, __shfl_xor_sync(kl::kFullMask, v, offset));
  return v;
}

// Occupancy: how many blocks of a kernel fit on one SM.
template <class Kernel>
int blocks_per_sm(Kernel kernel, int threads, std::size_t smem) {
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  return n;
}

// A kernel must opt in before it may use more than 48 KiB of dynamic shared memory.
template <class Kernel>
bool allow_large_smem(Kernel kernel) {
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const auto bytes = static_cast<int>(device_caps().smem_optin - attr.sharedSizeBytes);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  return true;
}

template <int N>
using PackSize = std::integral_constant<int, N>;

// Calls f(PackSize<n>{}) with the widest pack every row allows (8, 4, 2 or 1 elements, <= 16 bytes).
template <class T, class F>
void with_widest_pack(const Problem& p, F&& f) {
  const int n = kl::widest_pack(p.x, p.y, p.cols, sizeof(T));
  if constexpr (sizeof(T) == 2) {
    if (n == 8) return f(PackSize<8>{});
  }
  if (n == 4) return f(PackSize<4>{});
  if (n == 2) return f(PackSize<2>{});
  f(PackSize<1>{});
}

// The block steps (3-6) move any row in 16-byte packs, with single elements only where the row
// starts or ends inside one (RowPacks, step 3); that needs x and y misaligned alike, which rows of
// any K and views at the same offset are. Otherwise every element goes alone (packs of 1).
template <class T, class F>
void with_block_pack(const Problem& p, F&& f) {
  constexpr int kVec = 16 / sizeof(T);
  const auto gap = reinterpret_cast<std::uintptr_t>(p.x) - reinterpret_cast<std::uintptr_t>(p.y);
  if (gap % 16 == 0) f(PackSize<kVec>{});
  else f(PackSize<1>{});
}

// ---- step 1: three kernels, one thread per row ----------------------------------------------------

// Step 1a: thread r walks row r for its max. The 32 threads of a warp read addresses K elements
// apart, so each warp-wide load touches 32 cache lines: correct, and far from the copy bandwidth.
template <class T>
__global__ void softmax_three_kernels_max(const T* x, std::int64_t rows, int cols, float scale, float* row_max) {
  const std::int64_t r = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  float m = -INFINITY;
  for (int c = 0; c < cols; ++c) m = max_nan(m, kl::to_float(x[r * cols + c]) * scale);
  row_max[r] = m;
}

// Step 1b: a second walk sums e^(x - max). Subtracting the max keeps every exponent <= 0, so e^x
// cannot overflow however large x is (the "safe" softmax); expf is the accurate, slow exponential.
// One thread adds all K terms: a plain float sum drifts by up to ~K * 2^-24 (2.7e-3 at K = 600001 on
// tied inputs, README § step 1), so Kahan's compensation carries each add's rounding error forward.
template <class T>
__global__ void softmax_three_kernels_sum(const T* x, std::int64_t rows, int cols, float scale, const float* row_max,
                                          float* row_sum) {
  const std::int64_t r = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  float s = 0.f, lost = 0.f;  // lost: what the last add rounded away
  for (int c = 0; c < cols; ++c) {
    const float term = expf(kl::to_float(x[r * cols + c]) * scale - row_max[r]) - lost;
    const float t = s + term;
    lost = (t - s) - term;
    s = t;
  }
  row_sum[r] = s;
}

// Step 1c: a third walk writes e^(x - max) / sum. Three reads and one write of every element.
template <class T>
__global__ void softmax_three_kernels_normalise(const T* x, T* y, std::int64_t rows, int cols, float scale,
                                                const float* row_max, const float* row_sum) {
  const std::int64_t r = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  for (int c = 0; c < cols; ++c)
    y[r * cols + c] = kl::from_float<T>(expf(kl::to_float(x[r * cols + c]) * scale - row_max[r]) / row_sum[r]);
}

template <class T>
void launch_three_kernels_t(const Problem& p, Workspace& ws, cudaStream_t s) {
  ws.stats.resize(2 * static_cast<std::size_t>(p.rows));  // allocates in the untimed check run only
  float* row_max = ws.stats.data();
  float* row_sum = row_max + p.rows;
  const auto* x = static_cast<const T*>(p.x);
  const int cols = static_cast<int>(p.cols);
  const auto grid = static_cast<unsigned>((p.rows + 255) / 256);
  softmax_three_kernels_max<<<grid, 256, 0, s>>>(x, p.rows, cols, p.scale, row_max);
  CUDA_CHECK_LAUNCH();
  softmax_three_kernels_sum<<<grid, 256, 0, s>>>(x, p.rows, cols, p.scale, row_max, row_sum);
  CUDA_CHECK_LAUNCH();
  softmax_three_kernels_normalise<<<grid, 256, 0, s>>>(x, static_cast<T*>(p.y), p.rows, cols, p.scale, row_max, row_sum);
  CUDA_CHECK_LAUNCH();
}

inline void launch_three_kernels(const Problem& p, Workspace& ws, cudaStream_t s) {
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) { launch_three_kernels_t<decltype(t)>(p, ws, s); });
}

// ---- step 2: one warp per row, the row in registers -----------------------------------------------

constexpr int kWarpBlock = 128;         // threads per block of step 2
constexpr int kWarpMaxPerLane = 64;     // floats of the row one lane may hold in registers
constexpr std::int64_t kWarpMaxCols = 32 * kWarpMaxPerLane;  // 2048: step 2's longest row

// How step 2 lays a row over a warp: `lanes` lanes per row (32 / lanes rows per warp when the row
// is short), each holding `packs` packs of the row in registers.
struct WarpShape {
  int lanes, packs;
};

inline int next_pow2(std::int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

inline WarpShape warp_shape(std::int64_t cols, int pack) {
  const std::int64_t packs_in_row = (cols + pack - 1) / pack;
  if (packs_in_row <= 32) return {next_pow2(packs_in_row), 1};
  return {32, next_pow2((packs_in_row + 31) / 32)};
}

// Blocks of step 2 that must fit on an SM, by floats per lane (the register budget it implies):
// up to 32 floats, 8 blocks = 1024 threads at <= 64 registers (<float, 4, 8> took 80 registers and
// kept 768 threads); a 64-float row slice needs ~128 registers whatever we ask, so no bound there.
constexpr int warp_min_blocks(int floats_per_lane) { return floats_per_lane <= 32 ? 8 : 6; }

// Step 2: a warp (or a group of lanes, for short rows) owns a row: one coalesced pass of 16-byte
// loads into registers, max and sum by shuffles, one pass of stores. One read, one write, no
// shared memory, no __syncthreads.
template <class T, int Pack, int kPacks>
__global__ void __launch_bounds__(kWarpBlock, warp_min_blocks(kPacks * Pack))
    softmax_warp_per_row(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows, int cols, float scale,
                         int lanes_arg) {
  const int lanes = kPacks > 1 ? 32 : lanes_arg;  // a row of more than one pack per lane spans the warp
  const int lane = threadIdx.x % 32;
  const int sub = lane % lanes;  // this lane's place in its row
  const int rows_per_warp = 32 / lanes;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / 32);
  const std::int64_t warp = blockIdx.x * std::int64_t{blockDim.x / 32} + threadIdx.x / 32;
  for (std::int64_t first = warp * rows_per_warp; first < rows; first += warps * rows_per_warp) {
    const std::int64_t row = first + lane / lanes;
    const bool live = row < rows;  // lanes past the last row still take part in the shuffles
    const std::int64_t offset = (live ? row : 0) * cols;
    float v[kPacks][Pack];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int col = (k * lanes + sub) * Pack;
      if (live && col < cols) {
        kl::load_pack<Pack>(x + offset + col, v[k]);
        scale_all(v[k], scale);
#pragma unroll
        for (int i = 0; i < Pack; ++i) m = max_nan(m, v[k][i]);
      } else {
#pragma unroll
        for (int i = 0; i < Pack; ++i) v[k][i] = -INFINITY;  // e^(-inf - max) = 0: padding adds nothing
      }
    }
    m = group_allreduce<kl::MaxOp>(m, lanes);
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
#pragma unroll
      for (int i = 0; i < Pack; ++i) s += v[k][i] = fast_exp(v[k][i] - m);
    }
    s = group_allreduce<kl::SumOp>(s, lanes);
    const float inv = 1.f / s;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int col = (k * lanes + sub) * Pack;
      if (live && col < cols) {
        scale_all(v[k], inv);
        kl::store_pack<Pack>(y + offset + col, v[k]);
      }
    }
  }
}

template <class T, int Pack, int kPacks>
void launch_warp_t(const Problem& p, WarpShape w, cudaStream_t s) {
  if constexpr (kPacks * Pack <= kWarpMaxPerLane) {
    if (w.packs != kPacks) return launch_warp_t<T, Pack, kPacks * 2>(p, w, s);
    const auto kernel = softmax_warp_per_row<T, Pack, kPacks>;
    static const int per_sm = blocks_per_sm(kernel, kWarpBlock, 0);
    const std::int64_t rows_per_block = kWarpBlock / 32 * (32 / w.lanes);
    const std::int64_t grid = std::min<std::int64_t>((p.rows + rows_per_block - 1) / rows_per_block,
                                                     std::int64_t{per_sm} * kl::sm_count());
    kernel<<<static_cast<unsigned>(grid), kWarpBlock, 0, s>>>(static_cast<const T*>(p.x), static_cast<T*>(p.y), p.rows,
                                                             static_cast<int>(p.cols), p.scale, w.lanes);
    CUDA_CHECK_LAUNCH();
  } else {
    throw std::logic_error("step 2: no kernel for " + std::to_string(w.packs) + " packs per lane");
  }
}

inline void launch_warp_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_widest_pack<T>(p, [&](auto pack) {
      constexpr int kPack = decltype(pack)::value;
      launch_warp_t<T, kPack, 1>(p, warp_shape(p.cols, kPack), s);
    });
  });
}

// ---- step 3: one block per row, the row cached in shared memory -----------------------------------

constexpr std::array<int, 4> kBlockSizes = {128, 256, 512, 1024};

// Threads an H100 SM keeps resident at most (64 warps). Steps 3 and 6 ask the compiler for
// __launch_bounds__(kThreads, kFullSmThreads / kThreads), i.e. at most 32 registers a thread, so that
// registers never cap residency below what shared memory allows (see "Keep loads in flight").
constexpr int kFullSmThreads = 2048;

// Of the block sizes, the smallest that keeps the most threads resident per SM, given how many
// blocks of each fit (occupancy). Smaller blocks at the same occupancy mean more blocks per SM,
// whose load, reduce and store phases overlap.
inline int fullest_block(const std::array<int, 4>& blocks_per_sm) {
  int best = 0;
  for (int i = 1; i < 4; ++i)
    if (blocks_per_sm[i] * kBlockSizes[i] > blocks_per_sm[best] * kBlockSizes[best]) best = i;
  return best;
}

// A row of n elements at `row` as the block steps see it: aligned packs of Pack elements (16 bytes),
// the first starting `shift` elements before the row, so that odd K and unaligned views still move
// almost every element in 16-byte loads and stores; only a pack that sticks out of the row at its
// start or end goes element by element. (Before, such rows fell back to packs of 1 throughout: 4-8x
// the load and store instructions, f32 K = 50257 at 2494 GB/s against 2805-2896 around it.)
// A shared-memory cache puts element c at cache[c + shift], so its packs are aligned as well, and
// pack q always belongs to thread q % kThreads: each thread only ever reads back what it wrote.
template <int Pack>
struct RowPacks {
  int n, shift, lo, hi;  // packs lo .. hi - 1 lie wholly inside the row
  template <class T>
  __device__ RowPacks(const T* row, int n_) : n(n_) {
    shift = static_cast<int>(reinterpret_cast<std::uintptr_t>(row) % (Pack * sizeof(T)) / sizeof(T));
    lo = shift > 0 ? 1 : 0;
    hi = (n + shift) / Pack;
  }
  __device__ int first(int q) const { return q * Pack - shift; }  // pack q's first element in the row
  __device__ bool inside(int c) const { return c >= 0 && c < n; }
};

// Calls f(c) with the first element c of each pack this thread owns that sticks out of the row
// (at most two in the whole row: where it starts and where it ends). c may be negative: only the
// elements c + i with r.inside(c + i) are the row's.
template <int Pack, int kThreads, class F>
__device__ __forceinline__ void for_my_partial_packs(const RowPacks<Pack>& r, F&& f) {
  if constexpr (Pack > 1) {
    if (r.lo == 1 && threadIdx.x == 0) f(r.first(0));
    if (r.hi >= r.lo && r.first(r.hi) < r.n && static_cast<int>(threadIdx.x) == r.hi % kThreads) f(r.first(r.hi));
  }
}

// Calls f(c, PackSize<Pack>{}) for each whole pack this thread owns (q = t, t + kThreads, ...), c
// its first element in the row, then f(c, PackSize<1>{}) for each element of a partial one.
template <int Pack, int kThreads, class F>
__device__ __forceinline__ void for_my_packs(const RowPacks<Pack>& r, F&& f) {
  const int t = threadIdx.x;
#pragma unroll 4
  for (int q = t < r.lo ? t + kThreads : t; q < r.hi; q += kThreads) f(r.first(q), PackSize<Pack>{});
  for_my_partial_packs<Pack, kThreads>(r, [&](int c) {
#pragma unroll
    for (int i = 0; i < Pack; ++i)
      if (r.inside(c + i)) f(c + i, PackSize<1>{});
  });
}

// Loads each thread keeps in flight in the caching pass of steps 3 and 6: 2 packs of 16 bytes, or 8
// single elements (x and y misaligned differently). 2 x 16 B x 2048 threads = 64 KB in flight per SM
// covers the HBM latency; 4 packs (run 5) needed 40-48 registers and cost residency (README § step 3).
template <int Pack>
constexpr int kCacheBatch = Pack == 1 ? 8 : 2;

// An unsigned type as wide as a pack of `Bytes` bytes.
template <int Bytes>
struct PackWord;
template <>
struct PackWord<2> { using type = unsigned short; };
template <>
struct PackWord<4> { using type = unsigned; };
template <>
struct PackWord<16> { using type = uint4; };

// The output store of steps 3-6: N floats narrowed to T and written to global memory with one store
// instruction, __stwb (st.global.wb, the ordinary store) of a word as wide as the pack. kl::store_pack
// copies a Pack, and in these kernels' unrolled loops nvcc 13 split that copy into N scalar stores
// at a 16-byte stride: 16 sectors per warp-wide store instead of 4, a third of the bandwidth in f16
// (README, "Steps 3-5: the stores"). An asm store cannot be split. (Step 2 keeps kl::store_pack: its
// stores come out whole, and this one costs its 80-register kernels a 24-byte spill.)
template <int N, class T>
__device__ __forceinline__ void store_whole(T* p, const float (&in)[N]) {
  kl::Pack<T, N> pk;
#pragma unroll
  for (int i = 0; i < N; ++i) pk.v[i] = kl::from_float<T>(in[i]);
  using Word = typename PackWord<sizeof(pk)>::type;
  Word w;
  memcpy(&w, &pk, sizeof w);
  __stwb(reinterpret_cast<Word*>(p), w);
}

// This thread's share of the sum of e^(x scale - m) over a row read from src (global memory or the
// shared-memory cache): the sum pass of steps 3, 4 and 6.
template <int Pack, int kThreads, class T>
__device__ __forceinline__ float exp_sum(const T* src, const RowPacks<Pack>& r, float scale, float m) {
  float s = 0.f;
  for_my_packs<Pack, kThreads>(r, [&](int c, auto pack) {
    constexpr int N = decltype(pack)::value;
    float v[N];
    kl::load_pack<N>(src + c, v);
#pragma unroll
    for (int i = 0; i < N; ++i) s += fast_exp(v[i] * scale - m);
  });
  return s;
}

// This thread's share of y = e^(x scale - m) * inv (inv = 1 / the row's sum), x read from src: the
// store pass of steps 3-6.
template <int Pack, int kThreads, class T>
__device__ __forceinline__ void store_probs(const T* src, T* y, const RowPacks<Pack>& r, float scale, float m,
                                            float inv) {
  for_my_packs<Pack, kThreads>(r, [&](int c, auto pack) {
    constexpr int N = decltype(pack)::value;
    float v[N];
    kl::load_pack<N>(src + c, v);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = fast_exp(v[i] * scale - m) * inv;
    store_whole<N>(y + c, v);
  });
}

// Stores one pack to the cache and returns the max of m and its elements times scale.
template <int N, class T>
__device__ __forceinline__ float keep_and_max(T* to, const kl::Pack<T, N>& raw, float scale, float m) {
  kl::store_raw(to, raw);
  float v[N];
  kl::to_floats(raw, v);
#pragma unroll
  for (int i = 0; i < N; ++i) m = max_nan(m, v[i] * scale);
  return m;
}

// The caching pass of steps 3 and 6: copies the row r at src to the shared memory at cache (element
// c to cache[c + r.shift]) and returns this thread's max of it times scale. Each thread issues a batch
// of loads before it uses any, so 32 bytes per thread are on their way at once instead of 16: one
// pack at a time could not cover the HBM latency (step 3 at K = 2048 f32 ran at 59 % of copy).
template <int Pack, int kThreads, class T>
__device__ __forceinline__ float cache_and_max(const T* __restrict__ src, T* cache, const RowPacks<Pack>& r,
                                               float scale) {
  constexpr int kBatch = kCacheBatch<Pack>;
  const int t = threadIdx.x;
  float m = -INFINITY;
  for (int q0 = t < r.lo ? t + kThreads : t; q0 < r.hi; q0 += kBatch * kThreads) {
    kl::Pack<T, Pack> raw[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int q = q0 + b * kThreads;
      if (q < r.hi) raw[b] = kl::load_raw<Pack>(src + r.first(q));
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int q = q0 + b * kThreads;
      if (q < r.hi) m = keep_and_max(cache + q * Pack, raw[b], scale, m);
    }
  }
  for_my_partial_packs<Pack, kThreads>(r, [&](int c) {
    kl::Pack<T, 1> one[Pack];  // all of a partial pack's loads go out before any is used
#pragma unroll
    for (int i = 0; i < Pack; ++i)
      if (r.inside(c + i)) one[i] = kl::load_raw<1>(src + c + i);
#pragma unroll
    for (int i = 0; i < Pack; ++i)
      if (r.inside(c + i)) m = keep_and_max(cache + r.shift + c + i, one[i], scale, m);
  });
  return m;
}

// Shared memory for a cached row of n elements: one pack more, for the shift.
template <class T, int Pack>
constexpr std::size_t cache_bytes(std::int64_t n) {
  return static_cast<std::size_t>(n + Pack) * sizeof(T);
}

// Step 3: a block owns a row; its one pass over global memory keeps the row in shared memory, and
// the max, sum and store passes read it from there. One read, one write, for rows of any length
// up to the shared memory of a block.
template <class T, int Pack, int kThreads>
__global__ void __launch_bounds__(kThreads, kFullSmThreads / kThreads)
    softmax_block_cached(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows, int cols, float scale) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* cache = reinterpret_cast<T*>(smem);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const RowPacks<Pack> r(xr, cols);
    T* const rc = cache + r.shift;  // the row in the cache: element c at rc[c]
    const float m = kl::block_allreduce<kThreads, kl::MaxOp>(cache_and_max<Pack, kThreads>(xr, cache, r, scale));
    const float s = exp_sum<Pack, kThreads>(rc, r, scale, m);
    const float inv = 1.f / kl::block_allreduce<kThreads>(s);
    store_probs<Pack, kThreads>(rc, yr, r, scale, m, inv);
  }
}

template <class T, int Pack, int kThreads>
int cached_blocks_per_sm(std::size_t smem) {
  static const bool ready = allow_large_smem(softmax_block_cached<T, Pack, kThreads>);
  (void)ready;
  return blocks_per_sm(softmax_block_cached<T, Pack, kThreads>, kThreads, smem);
}

template <class T, int Pack, int kThreads>
void run_cached(const Problem& p, std::size_t smem, int per_sm, cudaStream_t s) {
  const std::int64_t grid = std::min<std::int64_t>(p.rows, std::int64_t{per_sm} * kl::sm_count());
  softmax_block_cached<T, Pack, kThreads><<<static_cast<unsigned>(grid), kThreads, smem, s>>>(
      static_cast<const T*>(p.x), static_cast<T*>(p.y), p.rows, static_cast<int>(p.cols), p.scale);
  CUDA_CHECK_LAUNCH();
}

template <class T, int Pack>
void launch_cached_t(const Problem& p, cudaStream_t s) {
  const std::size_t smem = cache_bytes<T, Pack>(p.cols);
  const std::array<int, 4> per_sm = {cached_blocks_per_sm<T, Pack, 128>(smem), cached_blocks_per_sm<T, Pack, 256>(smem),
                                     cached_blocks_per_sm<T, Pack, 512>(smem), cached_blocks_per_sm<T, Pack, 1024>(smem)};
  const int i = fullest_block(per_sm);
  if (per_sm[i] == 0) throw NotSupported("no block with " + std::to_string(smem) + " bytes of shared memory fits an SM");
  if (i == 0) run_cached<T, Pack, 128>(p, smem, per_sm[i], s);
  else if (i == 1) run_cached<T, Pack, 256>(p, smem, per_sm[i], s);
  else if (i == 2) run_cached<T, Pack, 512>(p, smem, per_sm[i], s);
  else run_cached<T, Pack, 1024>(p, smem, per_sm[i], s);
}

inline void launch_block_cached(const Problem& p, Workspace&, cudaStream_t s) {
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_block_pack<T>(p, [&](auto pack) { launch_cached_t<T, decltype(pack)::value>(p, s); });
  });
}

// ---- step 4: one block per row, uncached ----------------------------------------------------------

constexpr int kUncachedThreads = 512;

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
      for (int i = 0; i < N; ++i) m = max_nan(m, v[i] * scale);
    });
    m = kl::block_allreduce<kThreads, kl::MaxOp>(m);
    const float s = exp_sum<Pack, kThreads>(xr, r, scale, m);
    const float inv = 1.f / kl::block_allreduce<kThreads>(s);
    store_probs<Pack, kThreads>(xr, yr, r, scale, m, inv);
  }
}

// The grid of the uncached steps: every row gets a block, up to as many as fit on the GPU at once.
template <class Kernel>
unsigned uncached_grid(Kernel kernel, std::int64_t rows) {
  const int per_sm = blocks_per_sm(kernel, kUncachedThreads, 0);
  return static_cast<unsigned>(std::min<std::int64_t>(rows, std::int64_t{per_sm} * kl::sm_count()));
}

inline void launch_block_uncached(const Problem& p, Workspace&, cudaStream_t s) {
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_block_pack<T>(p, [&](auto pack) {
      const auto kernel = softmax_block_uncached<T, decltype(pack)::value, kUncachedThreads>;
      kernel<<<uncached_grid(kernel, p.rows), kUncachedThreads, 0, s>>>(static_cast<const T*>(p.x), static_cast<T*>(p.y),
                                                                       p.rows, static_cast<int>(p.cols), p.scale);
      CUDA_CHECK_LAUNCH();
    });
  });
}

// ---- step 5: online softmax -----------------------------------------------------------------------

// Every thread of the block ends with the (max, sum) of the whole row: a butterfly of combines in
// each warp, then each thread combines the warps' results from shared memory.
template <int kThreads>
__device__ MaxSum block_allreduce_maxsum(MaxSum a) {
  constexpr int kWarps = kThreads / 32;
  __shared__ MaxSum per_warp[kWarps];
  for (int offset = 16; offset > 0; offset /= 2)
    a = combine(a, {__shfl_xor_sync(kl::kFullMask, a.m, offset), __shfl_xor_sync(kl::kFullMask, a.s, offset)});
  if (threadIdx.x % 32 == 0) per_warp[threadIdx.x / 32] = a;
  __syncthreads();
  MaxSum total{-INFINITY, 0.f};
  for (int w = 0; w < kWarps; ++w) total = combine(total, per_warp[w]);
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
    MaxSum acc{-INFINITY, 0.f};
    for_my_packs<Pack, kThreads>(r, [&](int c, auto pack) {
      constexpr int N = decltype(pack)::value;
      float v[N];
      kl::load_pack<N>(xr + c, v);
      scale_all(v, scale);
      acc = combine(acc, pack_stats(v));
    });
    acc = block_allreduce_maxsum<kThreads>(acc);
    const float inv = 1.f / acc.s;
    store_probs<Pack, kThreads>(xr, yr, r, scale, acc.m, inv);
  }
}

inline void launch_online(const Problem& p, Workspace&, cudaStream_t s) {
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_block_pack<T>(p, [&](auto pack) {
      const auto kernel = softmax_online<T, decltype(pack)::value, kUncachedThreads>;
      kernel<<<uncached_grid(kernel, p.rows), kUncachedThreads, 0, s>>>(static_cast<const T*>(p.x), static_cast<T*>(p.y),
                                                                       p.rows, static_cast<int>(p.cols), p.scale);
      CUDA_CHECK_LAUNCH();
    });
  });
}

// ---- step 6: a thread-block cluster per row (Hopper) ----------------------------------------------

constexpr int kClusterThreads = 512;
constexpr int kClusterMax = 8;                              // the largest portable cluster
constexpr std::int64_t kClusterPartBytes = 64 << 10;        // aim: at most 64 KiB of the row per CTA
constexpr std::int64_t kClusterMinRowBytes = 32 << 10;      // shorter rows fit one block (step 3)

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
// combine them, and each writes its part (one write). Rows of up to 8 x 227 KiB.
template <class T, int Pack, int kThreads>
__global__ void __launch_bounds__(kThreads, kFullSmThreads / kThreads)
    softmax_cluster(const T* __restrict__ x, T* __restrict__ y, int cols, float scale, int part) {
#if __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) unsigned char smem[];
  T* cache = reinterpret_cast<T*>(smem);
  __shared__ MaxSum partial;  // this CTA's (max, sum), read by every CTA of the cluster
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
  if (threadIdx.x == 0) partial = m == -INFINITY ? MaxSum{m, 0.f} : MaxSum{m, s};  // a part of only -inf adds nothing
  cluster.sync();  // every CTA's partial is written
  MaxSum total{-INFINITY, 0.f};
  for (unsigned r = 0; r < cluster.num_blocks(); ++r) total = combine(total, *cluster.map_shared_rank(&partial, r));
  cluster.sync();  // no CTA may exit while another still reads its partial
  const float inv = 1.f / total.s;
  store_probs<Pack, kThreads>(rc, yr, r, scale, total.m, inv);
#endif
}

template <class T, int Pack>
void launch_cluster_t(const Problem& p, cudaStream_t s) {
  const auto kernel = softmax_cluster<T, Pack, kClusterThreads>;
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
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_block_pack<T>(p, [&](auto pack) { launch_cluster_t<T, decltype(pack)::value>(p, s); });
  });
}

// ---- which step can handle which shape ------------------------------------------------------------

inline std::string kib(std::int64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

// "" when the step can run the problem on this GPU, else why not (the driver prints it as n/a).
inline std::string always(const Problem&, const DeviceCaps&) { return ""; }

inline std::string warp_support(const Problem& p, const DeviceCaps&) {
  if (p.cols <= kWarpMaxCols) return "";
  return "a row of " + std::to_string(p.cols) + " does not fit in a warp's registers (at most " +
         std::to_string(kWarpMaxCols) + ")";
}

inline std::string cached_support(const Problem& p, const DeviceCaps& caps) {
  const std::int64_t row = p.cols * dtype_bytes(p.dtype);
  if (row <= static_cast<std::int64_t>(row_smem_bytes(caps))) return "";
  return "a row of " + kib(row) + " exceeds a block's shared memory (" + kib(row_smem_bytes(caps)) + ")";
}

inline std::string cluster_support(const Problem& p, const DeviceCaps& caps) {
  const std::int64_t row = p.cols * dtype_bytes(p.dtype);
  if (caps.cc_major < 9)
    return "thread-block clusters need sm_90 (this GPU is sm_" + std::to_string(caps.cc_major) +
           std::to_string(caps.cc_minor) + ")";
  if (row < kClusterMinRowBytes) return "a row of " + kib(row) + " fits one block's shared memory (step 3)";
  const int size = cluster_size(p.cols, dtype_bytes(p.dtype));
  const std::int64_t part = cluster_part(p.cols, size, 8) * dtype_bytes(p.dtype);
  if (part > static_cast<std::int64_t>(row_smem_bytes(caps)))
    return "a row of " + kib(row) + " exceeds " + std::to_string(kClusterMax) + " CTAs' shared memory";
  return "";
}

inline std::string cudnn_support(const Problem& p, const DeviceCaps&) {
  if (p.scale != 1.f) return "cuDNN's softmax has no input scale";
  if (p.rows > INT_MAX) return "cuDNN tensor sizes are int";
  return "";
}

// ---- step 7: the dispatcher -----------------------------------------------------------------------

// The dispatcher's thresholds, all of them, per dtype, from the H100 sweep (README § step 7 has the
// table; GB/s, copy ~2950):
//  - registers (step 2) up to 2048 elements with 16-byte packs (f32 2887 vs 2863 cached, f16 2514 vs
//    2452), up to 1024 with narrower packs;
//  - shared memory (step 3) for f32 rows up to 64 KiB (K = 16384: 2839 vs 2764 in a cluster) and for
//    16-bit rows up to 32 KiB (f16 K = 16384: 2641 vs 2200; at 64 KiB the cluster wins, 2597 vs 2491);
//  - a cluster (step 6) for longer rows on sm_90, the cache if it still fits elsewhere, else step 5.
// Step 4 wins nowhere since step 3's stores are whole (it ran 16-bit rows of 8-16 KiB before).
struct DispatchLimits {
  std::int64_t warp_cols_wide;    // step 2 up to this K with 16-byte packs
  std::int64_t warp_cols_narrow;  // ... and up to this K with packs of 1 or 2 elements (8 bytes or less)
  std::int64_t cached_bytes;      // then step 3 up to this row size in bytes
};
constexpr DispatchLimits kDispatchF32{2048, 1024, 64 << 10};
constexpr DispatchLimits kDispatch16Bit{2048, 1024, 32 << 10};  // f16 and bf16

static_assert(kDispatchF32.warp_cols_wide <= kWarpMaxCols && kDispatch16Bit.warp_cols_wide <= kWarpMaxCols,
              "step 2 cannot take rows longer than kWarpMaxCols");

inline const DispatchLimits& dispatch_limits(Dtype dtype) {
  return dtype == Dtype::f32 ? kDispatchF32 : kDispatch16Bit;
}

// The step (2 to 6) the dispatcher runs for rows of `cols` elements of `dtype` moved in packs of `pack`.
inline int choose_step(std::int64_t cols, Dtype dtype, int pack, const DeviceCaps& caps) {
  const DispatchLimits& lim = dispatch_limits(dtype);
  const bool wide = pack * dtype_bytes(dtype) == 16;
  if (cols <= (wide ? lim.warp_cols_wide : lim.warp_cols_narrow)) return 2;
  const Problem p{nullptr, nullptr, 1, cols, dtype, 1.f};
  const std::int64_t row = cols * dtype_bytes(dtype);
  if (row <= lim.cached_bytes) return 3;
  if (cluster_support(p, caps).empty()) return 6;
  if (cached_support(p, caps).empty()) return 3;
  return 5;
}

inline int chosen_step(const Problem& p) {
  return choose_step(p.cols, p.dtype, kl::widest_pack(p.x, p.y, p.cols, dtype_bytes(p.dtype)), device_caps());
}

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s);  // defined after the table

// ---- the library: cuDNN ---------------------------------------------------------------------------

inline void cudnn_check(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_NOT_SUPPORTED) throw NotSupported(std::string(call) + ": CUDNN_STATUS_NOT_SUPPORTED");
  if (status != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + " failed: " + cudnnGetErrorString(status));
}

// The rows as an N x C x 1 x 1 tensor (N = M, C = K); INSTANCE mode normalises over C*H*W = K.
inline void launch_cudnn(const Problem& p, Workspace& ws, cudaStream_t s) {
  if (empty(p)) return;
  if (!ws.cudnn) cudnn_check(cudnnCreate(&ws.cudnn), "cudnnCreate");
  cudnn_check(cudnnSetStream(ws.cudnn, s), "cudnnSetStream");
  const cudnnDataType_t type = p.dtype == Dtype::f32   ? CUDNN_DATA_FLOAT
                               : p.dtype == Dtype::f16 ? CUDNN_DATA_HALF
                                                       : CUDNN_DATA_BFLOAT16;
  cudnnTensorDescriptor_t desc;
  cudnn_check(cudnnCreateTensorDescriptor(&desc), "cudnnCreateTensorDescriptor");
  cudnnStatus_t status = cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, type, static_cast<int>(p.rows),
                                                    static_cast<int>(p.cols), 1, 1);
  const float one = 1.f, zero = 0.f;  // y = 1 * softmax(x) + 0 * y
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnSoftmaxForward(ws.cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &one, desc, p.x, &zero,
                                 desc, p.y);
  cudnnDestroyTensorDescriptor(desc);
  cudnn_check(status, "cudnnSoftmaxForward");
}

// ---- the table of steps ---------------------------------------------------------------------------

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);
using Support = std::string (*)(const Problem& p, const DeviceCaps& caps);

struct SoftmaxStep {
  const char* name;
  const char* idea;
  Launcher launch;
  Support support;
  bool library;
};

inline constexpr SoftmaxStep kSteps[] = {
    {"three_kernels", "max, sum of exp, normalise: three kernels, one thread per row", launch_three_kernels, always, false},
    {"warp_per_row", "a warp per row, the row in registers, 16-byte packs, shuffles", launch_warp_per_row, warp_support, false},
    {"block_cached", "a block per row, the row cached in shared memory", launch_block_cached, cached_support, false},
    {"block_uncached", "a block per row, three passes over global memory", launch_block_uncached, always, false},
    {"online", "a block per row, running (max, sum): two passes over global memory", launch_online, always, false},
    {"cluster", "a cluster of CTAs per row, partial (max, sum) via DSMEM (sm_90)", launch_cluster, cluster_support, false},
    {"dispatch", "picks step 2, 3, 5 or 6 by row length, dtype and pack", launch_dispatch, always, false},
    {"cudnn", "cudnnSoftmaxForward (ACCURATE, INSTANCE)", launch_cudnn, cudnn_support, true},
};

inline constexpr int kDispatchStep = 7;

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s) {
  if (empty(p)) return;
  kSteps[chosen_step(p) - 1].launch(p, ws, s);
}

// The public API: softmax(x * scale) of each row of a rows x cols matrix, through the dispatcher.
// Returns without launching anything when rows or cols is 0.
template <class T>
void softmax(const T* x, T* y, std::int64_t rows, std::int64_t cols, Workspace& ws, float scale = 1.f,
             cudaStream_t s = nullptr) {
  if (cols > INT_MAX) throw kl::UsageError("softmax: rows longer than 2^31 - 1 elements are not supported");
  launch_dispatch(Problem{x, y, rows, cols, dtype_of<T>(), scale}, ws, s);
}

// The same with a workspace of its own. Pass one in to capture the call in a CUDA graph: the
// first call for a shape may allocate, and allocation is not allowed during a capture.
template <class T>
void softmax(const T* x, T* y, std::int64_t rows, std::int64_t cols, float scale = 1.f, cudaStream_t s = nullptr) {
  Workspace ws;
  softmax(x, y, rows, cols, ws, scale, s);
}

// ---- shapes ---------------------------------------------------------------------------------------

constexpr std::int64_t kDefaultElements = std::int64_t{1} << 26;  // 2^26: 256 MiB of f32, well over the L2

// The rows that make M * K closest to 2^26 for a given K (at least 1).
inline std::int64_t default_rows(std::int64_t cols) {
  return std::max<std::int64_t>(1, (kDefaultElements + cols / 2) / cols);
}

// --sweep: K = 32 ... 131072 in powers of two, and 1000, 4097, 50257 (odd sizes, a vocabulary).
inline std::vector<std::pair<std::int64_t, std::int64_t>> sweep_shapes() {
  std::vector<std::int64_t> ks = {1000, 4097, 50257};
  for (std::int64_t k = 32; k <= 131072; k *= 2) ks.push_back(k);
  std::sort(ks.begin(), ks.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
  for (std::int64_t k : ks) shapes.emplace_back(default_rows(k), k);
  return shapes;
}

}  // namespace lesson04
