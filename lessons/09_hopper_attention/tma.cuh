// Lesson 09: the tensor memory accelerator (TMA) and the shared-memory barriers it completes on, as
// thin PTX wrappers, and the host side that describes a tensor to it (a CUtensorMap). One thread
// asks for a whole box of a tensor; the copy engine writes it to shared memory in the 128-byte
// swizzled layout wgmma reads, fills rows outside the tensor with zeros, and counts the bytes it
// delivered on an mbarrier that the consumers wait on. Device code needs sm_90.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <string>

#include "common/check.cuh"

namespace lesson09 {

// ---- device ----------------------------------------------------------------------------------------

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// A barrier that completes when `arrivals` threads have arrived and every byte announced to it
// (expect_tx) has landed. Initialised by one thread, then made visible to the copy engine.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// This thread arrives and announces `bytes` more to come from the copy engine.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

// A plain arrival (a consumer saying it is done with a stage).
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// Waits until the barrier's phase of parity `phase` has completed (phases alternate 0, 1, 0, ...).
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, int phase) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(phase)
      : "memory");
}

// Copies the box at coordinates (c0 innermost, c1, c2) of a 3-D tensor into shared memory at dst;
// completion is counted on bar. Issued by one thread.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}

// ---- host ------------------------------------------------------------------------------------------

// A [heads_total, seq, dim] f16 tensor (Q, K or V of lesson 07's layout) as the copy engine sees it:
// boxes of 64 rows x 64 columns (one swizzled panel, 8 KiB), rows past seq zero-filled.
inline CUtensorMap head_tensor_map(const void* base, std::int64_t heads_total, int seq, int dim) {
  static const auto encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !fn) throw kl::NotSupported("the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(dim), static_cast<cuuint64_t>(seq),
                              static_cast<cuuint64_t>(heads_total)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(dim) * 2, static_cast<cuuint64_t>(seq) * dim * 2};
  const cuuint32_t box[3] = {64, 64, 1}, element_strides[3] = {1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, const_cast<void*>(base), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw kl::NotSupported("cuTensorMapEncodeTiled refused the tensor (" + std::to_string(r) + ")");
  return map;
}

}  // namespace lesson09
