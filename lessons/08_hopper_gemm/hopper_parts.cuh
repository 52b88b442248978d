// Lesson 08, the pieces the Hopper steps (2-7) share, each naming the step that introduces it. A k-tile
// is 64 wide: 64 bf16/f16 values are one 128-byte row, the span of the 128-byte swizzle that TMA writes
// and wgmma reads. Needs sm_90a: included only by the lesson08_hopper target (hopper.cu).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "common/device.cuh"
#include "common/tma.cuh"
#include "common/wgmma.cuh"
#include "lessons/08_hopper_gemm/parts.cuh"

namespace lesson08 {

constexpr int kBk = 64;  // k values per tile: one 128-byte swizzled row

// Step 2: A and B as the copy engine sees them. A [M, K] in boxes of 64 k x bm rows (K-major, as wgmma
// reads A); B [K, N] in boxes of 64 columns x 64 k rows, one 8 KiB panel each (MN-major: wgmma reads it
// through the transpose bit). Out-of-range rows and columns arrive as zeros.
struct GemmMaps {
  CUtensorMap a, b;
};

inline GemmMaps gemm_maps(const Problem& p, int bm) {
  const auto type = p.dtype == Dtype::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const cuuint64_t a_dims[2] = {static_cast<cuuint64_t>(p.k), static_cast<cuuint64_t>(p.m)};
  const cuuint64_t a_stride[1] = {static_cast<cuuint64_t>(p.k) * 2};
  const cuuint32_t a_box[2] = {kBk, static_cast<cuuint32_t>(bm)};
  const cuuint64_t b_dims[2] = {static_cast<cuuint64_t>(p.n), static_cast<cuuint64_t>(p.k)};
  const cuuint64_t b_stride[1] = {static_cast<cuuint64_t>(p.n) * 2};
  const cuuint32_t b_box[2] = {64, kBk};
  return {kl::tensor_map(type, p.a, 2, a_dims, a_stride, a_box, CU_TENSOR_MAP_SWIZZLE_128B),
          kl::tensor_map(type, p.b, 2, b_dims, b_stride, b_box, CU_TENSOR_MAP_SWIZZLE_128B)};
}

// Step 2: one stage of shared memory holds k-tile kt of A (BM rows of 128 bytes) then of B (BN / 64
// panels of 64 rows of 128 bytes): (BM + BN) · 128 bytes, a multiple of the 1024-byte swizzle atom.
template <int BM, int BN>
__host__ __device__ constexpr int stage_bytes() {
  return (BM + BN) * 128;
}

// Step 2: dynamic shared memory rounded up to the 1024-byte alignment the swizzle needs (the launch asks
// for 1 KiB more than the layout uses).
__device__ __forceinline__ unsigned char* align_1024(unsigned char* smem) {
  const std::uint32_t pad = (1024 - kl::smem_u32(smem) % 1024) % 1024;
  return smem + pad;
}

// Step 2: one thread asks the copy engine for k-tile kt of the block's A rows and B columns, counted
// on `full`: one box of A, BN / 64 boxes of B.
template <int BM, int BN>
__device__ __forceinline__ void load_k_tile(unsigned char* stage, const GemmMaps& maps, std::uint64_t* full, int m0,
                                            int n0, int kt) {
  kl::mbarrier_arrive_expect_tx(full, stage_bytes<BM, BN>());
  kl::tma_load_2d(stage, &maps.a, kt * kBk, m0, full);
#pragma unroll
  for (int j = 0; j < BN / 64; ++j) kl::tma_load_2d(stage + BM * 128 + j * 8192, &maps.b, n0 + 64 * j, kt * kBk, full);
}

// Step 2: acc[64 x BN] (+)= A rows [64 x 64] · B [64 x BN] of one stage, four wgmmas of k = 16. A's k-step
// is 32 bytes along its swizzled rows (SBO: 8-row atoms, 1024 bytes apart); B's is 16 rows (2 KiB), its
// 64-column panels 8 KiB apart (LBO). accumulate = false overwrites acc (a tile's first k-tile).
template <int BN, class T>
__device__ __forceinline__ void wgmma_k_tile(float (&acc)[BN / 2], const unsigned char* a_rows, const unsigned char* b,
                                             bool accumulate) {
#pragma unroll
  for (int ks = 0; ks < kBk / 16; ++ks)
    kl::wgmma_ss_kn<BN, T>(acc, kl::smem_desc(a_rows + ks * 32, 16, kl::kAtomBytes),
                           kl::smem_desc(b + ks * 16 * kl::kRowBytes, 64 * kl::kRowBytes, kl::kAtomBytes),
                           accumulate || ks > 0);
}

// Step 6: k-tile kt into this block's stage, in a cluster of two: its own A box, and B's panels 2r and
// 2r + 1 (r: this block's rank) to both blocks. The stage's barrier expects all of A and B: half of B
// comes from the partner.
template <int BM, int BN>
__device__ __forceinline__ void load_k_tile_pair(unsigned char* stage, const GemmMaps& maps, std::uint64_t* full,
                                                 int m0, int n0, int kt, int rank) {
  kl::mbarrier_arrive_expect_tx(full, stage_bytes<BM, BN>());
  kl::tma_load_2d(stage, &maps.a, kt * kBk, m0, full);
#pragma unroll
  for (int j = rank * BN / 128; j < (rank + 1) * BN / 128; ++j)
    kl::tma_load_2d_multicast(stage + BM * 128 + j * 8192, &maps.b, n0 + 64 * j, kt * kBk, full, 0b11);
}

// Step 8: D as the copy engine sees it for a store: boxes of 64 columns x 64 rows, 128-byte swizzled.
inline CUtensorMap d_map(const Problem& p) {
  const auto type = p.dtype == Dtype::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(p.n), static_cast<cuuint64_t>(p.m)};
  const cuuint64_t stride[1] = {static_cast<cuuint64_t>(p.n) * 2};
  const cuuint32_t box[2] = {64, 64};
  return kl::tensor_map(type, p.d, 2, dims, stride, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

// Step 8: columns 128h ... 128h + 127 of the warpgroup's accumulator [64 x BN], finished (step 7's
// epilogue: α, β·C, bias, activation), into `out` as two 64 x 64 boxes of 128-byte swizzled rows. A warp's
// 4-byte writes of one register pair fall in 32 different banks (8 rows, each its own 16-byte chunk).
template <int BN, class T>
__device__ __forceinline__ void stage_acc_fused(const Problem& p, const float (&acc)[BN / 2], unsigned char* out, int h,
                                                int row0, int col0) {
  const int w = threadIdx.x % 128 / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 16 * h; j < 16 * h + 16; ++j) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = 16 * w + g + 8 * half, c = 8 * j + 2 * t - 128 * h;  // within the 64 x 128 block
      const float2 v =
          finish_pair<T>(p, row0 + r, col0 + 8 * j + 2 * t, acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
      const int box = c / 64, chunk = c % 64 / 8;
      *reinterpret_cast<typename Elem<T>::Pair*>(out + box * 8192 + r * 128 + ((chunk ^ (r % 8)) << 4) + c % 8 * 2) =
          Elem<T>::pair(v.x, v.y);
    }
  }
}

// Steps 6-8: a persistent launch in clusters of two blocks, `pairs` the tile pairs they walk: as many
// clusters as fit on the GPU at once, or fewer when there are fewer pairs. A cluster's blocks must sit in
// one GPC, and a GPC with an odd number of free SMs leaves one idle, so fewer than SMs / 2 clusters may
// fit; launching more would run the extra ones as a second wave.
template <auto kernel, class... Args>
void launch_pair_clusters(int threads, int smem, const TileOrder& pairs, cudaStream_t s, Args... args) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = s;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = 2, attribute.val.clusterDim.y = 1, attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  static int resident = 0;  // per kernel: asked on its first launch (the untimed check run)
  if (resident == 0) {
    config.gridDim = dim3(2 * (kl::sm_count() / 2));
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&resident, kernel, &config));
    if (resident == 0) throw kl::NotSupported("no cluster of two blocks of this size fits on this GPU");
  }
  config.gridDim = dim3(2 * (pairs.count() < resident ? pairs.count() : resident));
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

// Step 4: one block a SM of three warpgroups enters with 65536 / 384 = 168 registers a thread; the
// producer drops to 40 (at 24, step 6's producer spills) and the consumers grow to 232 (128
// accumulators, the descriptors and the epilogue's addresses): 128 · 40 + 256 · 232 = 64512 of 65536.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

// Step 2: the warpgroup's accumulator [64 x BN] into D at (row0, col0). Thread (warp w of the group,
// lane 4g + t) holds rows 16w + g (registers 4j, 4j + 1) and 16w + g + 8 (4j + 2, 4j + 3) at columns
// 8j + 2t and 8j + 2t + 1. Stored by store_pair (steps 2-6) or, kFused, store_pair_fused (step 7).
template <int BN, class T, bool kFused = false>
__device__ __forceinline__ void store_acc(const Problem& p, const float (&acc)[BN / 2], int row0, int col0) {
  const int w = threadIdx.x % 128 / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int row = row0 + 16 * w + g, col = col0 + 8 * j + 2 * t;
    if constexpr (kFused) {
      store_pair_fused<T>(p, row, col, acc[4 * j], acc[4 * j + 1]);
      store_pair_fused<T>(p, row + 8, col, acc[4 * j + 2], acc[4 * j + 3]);
    } else {
      store_pair<T>(p, row, col, acc[4 * j], acc[4 * j + 1]);
      store_pair<T>(p, row + 8, col, acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
}

}  // namespace lesson08
