// Lesson 04, the pieces several steps share. Each says which step introduced it; that step's file
// and README section explain it. The rest of a step (its kernel and launcher) is in steps/.
#pragma once
#ifndef KL_NO_CUDNN  // defined by CMake when cuDNN was not found: the cudnn row is then n/a
#include <cudnn.h>
#endif

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/block.cuh"
#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/pack.cuh"
#include "common/softmax_math.cuh"
#include "common/warp.cuh"
#include "lessons/04_online_softmax/problem.cuh"

namespace lesson04 {

// A step that turns a shape down at run time: the driver shows it as n/a.
using kl::NotSupported;

// ---- the GPU, for every step's launcher -----------------------------------------------------------

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

// ---- introduced by step 2 (steps/02_warp_per_row.cuh), used again by steps 3 and 5 ---------------

constexpr int kWarpMaxPerLane = 64;                          // floats of the row one lane may hold in registers
constexpr std::int64_t kWarpMaxCols = 32 * kWarpMaxPerLane;  // 2048: step 2's longest row, where step 3 takes over

// v *= scale, element by element.
template <int N>
__device__ __forceinline__ void scale_all(float (&v)[N], float scale) {
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] *= scale;
}

// ---- introduced by step 3 (steps/03_block_cached.cuh), used by steps 3-6 --------------------------

// Threads an SM keeps resident at most, on the architecture being compiled: 64 warps on the H100
// (and sm_80, sm_100), 48 on sm_86, sm_89 and sm_120, 32 on sm_75. Steps 3-6 ask the compiler for
// __launch_bounds__(kThreads, kFullSmThreads / kThreads), i.e. at most 32 registers a thread on the
// H100, so that registers never cap residency below what shared memory allows (see "Keep loads in
// flight").
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int kFullSmThreads = 1024;
#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
constexpr int kFullSmThreads = 1536;
#else
constexpr int kFullSmThreads = 2048;
#endif

// The blocks of `threads` a __launch_bounds__ asks an SM to hold: `blocks`, or as many as it holds if fewer
// (ptxas ignores a larger count, with a warning: sm_75 holds 8 blocks of 128).
constexpr int resident_blocks(int blocks, int threads) { return std::min(blocks, kFullSmThreads / threads); }

// A pack size as a type, so that one loop body (a generic lambda) serves whole packs and single elements.
template <int N>
using PackSize = std::integral_constant<int, N>;

// A row of n elements at `row` as the block steps see it: aligned packs of Pack elements (16 bytes),
// the first starting `shift` elements before the row, so that odd K and unaligned views still move
// almost every element in 16-byte loads and stores; only a pack that sticks out of the row at its
// start or end goes element by element (NOTES.md: what packs of 1 throughout cost).
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

// An unsigned type as wide as a pack of `Bytes` bytes.
template <int Bytes>
struct PackWord;
template <>
struct PackWord<2> {
  using type = unsigned short;
};
template <>
struct PackWord<4> {
  using type = unsigned;
};
template <>
struct PackWord<16> {
  using type = uint4;
};

// The output store of steps 3-6: N floats narrowed to T and written to global memory with one store
// instruction, __stwb (st.global.wb, the ordinary store) of a word as wide as the pack. The compiler
// may split kl::store_pack's copy of a Pack into N scalar stores at a 16-byte stride (16 sectors per
// warp-wide store instead of 4); an asm store cannot be split (README, "Steps 3-5: the stores";
// NOTES.md, step 3). Step 2 keeps kl::store_pack: its stores stay whole, and this one would make its
// 80-register kernels spill.
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
    for (int i = 0; i < N; ++i) s += kl::exp_ftz(v[i] * scale - m);
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
    for (int i = 0; i < N; ++i) v[i] = kl::exp_ftz(v[i] * scale - m) * inv;
    store_whole<N>(y + c, v);
  });
}

// ---- introduced by step 3, used again by step 6: the caching pass ---------------------------------

// Loads each thread keeps in flight in the caching pass of steps 3 and 6: 2 packs of 16 bytes, or 8
// single elements (x and y misaligned differently). 2 x 16 B x 2048 threads = 64 KB in flight per SM
// covers the HBM latency; 4 packs need 40-48 registers and cost residency (README § step 3).
template <int Pack>
constexpr int kCacheBatch = Pack == 1 ? 8 : 2;

// Stores one pack to the cache and returns the max of m and its elements times scale. A 16-bit pack
// takes its extreme before the scale: x * scale rounds monotonically in x, so the largest product comes
// from the largest x (the smallest for scale < 0), and a 16-bit value widens to float exactly.
template <int N, class T>
__device__ __forceinline__ float keep_and_max(T* to, const kl::Pack<T, N>& raw, float scale, float m) {
  kl::store_raw(to, raw);
  float v[N];
  if constexpr (sizeof(T) == 2 && N >= 2) {
    if (scale < 0.0f) kl::pack_extreme<false>(raw, v[0], v[1]);
    else kl::pack_extreme<true>(raw, v[0], v[1]);
    return kl::max_nan(kl::max_nan(m, v[0] * scale), v[1] * scale);
  }
  kl::to_floats(raw, v);
#pragma unroll
  for (int i = 0; i < N; ++i) m = kl::max_nan(m, v[i] * scale);
  return m;
}

// The caching pass of steps 3 and 6: copies the row r at src to the shared memory at cache (element
// c to cache[c + r.shift]) and returns this thread's max of it times scale. Each thread issues a batch
// of loads before it uses any, so 32 bytes per thread are on their way at once instead of 16: one
// pack at a time cannot cover the HBM latency (NOTES.md, step 3).
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

// ---- introduced by step 4 (steps/04_block_uncached.cuh), used again by step 5 ---------------------

constexpr int kUncachedThreads = 512;  // threads per block of steps 4 and 5
static_assert(kMaxCols + (kUncachedThreads - 1) <= INT_MAX, "a row of kMaxCols: a pack index past it overflows int");

// The grid of the uncached steps: every row gets a block, up to as many as fit on the GPU at once.
template <class Kernel>
unsigned uncached_grid(Kernel kernel, std::int64_t rows) {
  const int per_sm = blocks_per_sm(kernel, kUncachedThreads, 0);
  return static_cast<unsigned>(std::min<std::int64_t>(rows, std::int64_t{per_sm} * kl::sm_count()));
}

// ---- the launchers' scratch and dispatch over dtype and pack, for every step -----------------------

// Scratch a step may need: step 1's per-row statistics, the library's handle.
struct Workspace {
  kl::DeviceBuffer<float> stats;
#ifndef KL_NO_CUDNN
  cudnnHandle_t cudnn = nullptr;
#endif
  Workspace() = default;
  ~Workspace() {
#ifndef KL_NO_CUDNN
    if (cudnn) cudnnDestroy(cudnn);
#endif
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

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

// The launchers of the block steps (3-6): nothing to do for an empty problem, else f(T{}, PackSize<n>{})
// for the problem's dtype and with_block_pack's pack, so that f instantiates the step's kernels.
template <class F>
void for_block_kernels(const Problem& p, F&& f) {
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_block_pack<T>(p, [&](auto pack) { f(t, pack); });
  });
}

}  // namespace lesson04
