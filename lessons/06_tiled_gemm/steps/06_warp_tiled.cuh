// Lesson 06, step 6: warp tiling, a 3-stage cp.async pipeline, tuned tile sizes. The kernel is a
// template over its tile configuration (Config) and its epilogue (Epi): the plain GEMM here, the
// fused epilogue in step 7. blockIdx.z selects a K slice, which the dispatcher's split-K uses.
// cp.async needs sm_80: the kernel is compiled out below it, and its launcher refuses it there. Its
// tile loader (AsyncTileLoader) is in parts.cuh.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/arch.cuh"
#include "common/check.cuh"
#include "common/ptx.cuh"
#include "lessons/06_tiled_gemm/parts.cuh"

namespace lesson06 {

// A block tile BM x BN x BK made of (16 Q) x 64 warp tiles: in a warp, lane (lm, ln) = (lane / 8,
// lane % 8) owns 2Q quadrants of 4x4, rows lm*4 + 16 q (q < Q) and columns ln*4 + {0, 32}: a thread
// tile of 4Q x 8. Q = 2: 64 accumulators; Q = 4: 128, one block an SM of up to 255 registers, half
// the shared reads per FMA. S shared-memory stages.
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

// The configuration steps 6 and 7 use (the fastest of run.cuh's candidates on the H100, see the
// README): 16 warps of 32x64, 8x8 a thread, three stages of 16-deep tiles (72 KB).
using Tuned = Config<128, 256, 16>;

// One k of a thread's fragments from a stage: Q float4 of A (rows wm + 16q) and 2 float4 of B
// (columns wn and wn + 32).
template <class Cfg>
__device__ __forceinline__ void load_fragments(float4 (&a)[Cfg::Q], float4 (&b)[2], const float* stage, int kk, int wm,
                                               int wn) {
  const float* as = stage + kk * Cfg::Loader::kLdA + wm;
  const float* bs = stage + Cfg::BK * Cfg::Loader::kLdA + kk * Cfg::Loader::kLdB + wn;
#pragma unroll
  for (int q = 0; q < Cfg::Q; ++q) a[q] = *reinterpret_cast<const float4*>(as + 16 * q);
  b[0] = *reinterpret_cast<const float4*>(bs);
  b[1] = *reinterpret_cast<const float4*>(bs + 32);
}

// Lanes read A and B values that sit side by side (32 and 64 consecutive floats per warp), so each
// 16-byte shared read of a warp is one conflict-free wavefront (steps 4-5: two). Tiles arrive by
// cp.async S stages deep, with no staging registers or instructions among the FMAs, and the fragments
// of k+1 are read while the FMAs of k run (across the barrier too), so no FMA waits for shared
// memory. blockIdx.z selects a K slice [z*k_slice, (z+1)*k_slice) written to d + z*slice_stride.
template <class Cfg, class Epi>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    gemm_warp_tiled(Problem p, int k_slice, std::int64_t slice_stride) {
  static_assert(Cfg::BK % 2 == 0, "fragments alternate between two register sets");
#if KL_ARCH_AT_LEAST(80)  // cp.async; below sm_80 the body is empty and launch_warp_tiled refuses the kernel
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
    if (s < tiles)
      tile.copy(p, k_end, smem + s * Cfg::kStageFloats, smem + s * Cfg::kStageFloats + Cfg::BK * Cfg::Loader::kLdA);
    kl::cp_async_commit();
  }
  kl::cp_async_wait<Cfg::S - 1>();
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
        kl::cp_async_wait<Cfg::S - 2>();  // this thread's copies of tile t+1 have landed ...
        __syncthreads();                  // ... everyone's have, and no warp reads tile t's stage any more
        float* free = smem + stage * Cfg::kStageFloats;
        if (t + Cfg::S < tiles) tile.copy(p, k_end, free, free + Cfg::BK * Cfg::Loader::kLdA);
        kl::cp_async_commit();
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
#endif
}

// Launches gemm_warp_tiled over `slices` K slices of `depth`; shared memory is dynamic, and a kernel
// that needs more than 48 KB asks for it once. Throws kl::NotSupported where the kernel cannot run
// (a GPU older than sm_80, or code compiled for one), asked once.
template <class Cfg, class Epi>
void launch_warp_tiled(const Problem& p, cudaStream_t s, int slices = 1, int depth = 0, std::int64_t slice_stride = 0) {
  kl::require_arch<gemm_warp_tiled<Cfg, Epi>>(80);
  static const bool opted_in =
      Cfg::kSmemBytes <= (48 << 10) ||
      cudaFuncSetAttribute(gemm_warp_tiled<Cfg, Epi>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) ==
          cudaSuccess;
  if (!opted_in)
    throw std::runtime_error("cudaFuncSetAttribute: the tile needs more shared memory than the device has");
  gemm_warp_tiled<Cfg, Epi><<<tile_grid(p, Cfg::BM, Cfg::BN, slices), Cfg::kThreads, Cfg::kSmemBytes, s>>>(
      p, depth > 0 ? depth : p.k, slice_stride);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson06
