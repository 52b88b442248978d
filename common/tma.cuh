// The tensor memory accelerator (TMA) and the shared-memory barriers it completes on, as thin PTX
// wrappers, and the host side that describes a tensor to it (a CUtensorMap). One thread asks for a
// whole box of a tensor; the copy engine writes it to shared memory in the 128-byte swizzled layout
// wgmma reads, fills rows outside the tensor with zeros, and counts the bytes it delivered on an
// mbarrier that the consumers wait on. Device code needs sm_90. Used by lessons 08 and 09.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <string>

#include "common/check.cuh"

namespace kl {

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

// Whether the barrier's phase of parity `phase` has completed, without waiting for it.
__device__ __forceinline__ bool mbarrier_ready(std::uint64_t* bar, int phase) {
  std::uint32_t done;
  asm volatile(
      "{\n.reg .pred done;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 done, [%1], %2;\n"
      "selp.u32 %0, 1, 0, done;\n}\n"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(phase)
      : "memory");
  return done != 0;
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

// Copies the box at coordinates (c0 innermost, c1) of a 2-D tensor into shared memory at dst;
// completion is counted on bar. Issued by one thread.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}

// The other way: the box at (c0, c1) of a 2-D tensor is written from shared memory at src, clipped to
// the tensor's edges. Issued by one thread after every writer of src has run fence_proxy_async() and met
// it at a barrier; commit_group() closes the stores issued so far, and before src is written again
// wait_group_read<0>() waits until the copy engine has read it.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int c0, int c1, const void* src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(smem_u32(src))
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Waits until at most N committed store groups are still writing to global memory.
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// A barrier among `threads` threads of the block (a multiple of 32), numbered `id` (1 ... 15; 0 is
// __syncthreads'): one warpgroup can meet without stopping the others.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The same barrier, returning to every one of its `threads` threads whether `pred` held in all of them: a
// decision the whole group takes together (bar.red.and).
__device__ __forceinline__ bool named_barrier_all(int id, int threads, bool pred) {
  std::uint32_t all;
  asm volatile(
      "{\n.reg .pred p, q;\n"
      "setp.ne.u32 p, %1, 0;\n"
      "bar.red.and.pred q, %2, %3, p;\n"
      "selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(all)
      : "r"(static_cast<std::uint32_t>(pred)), "r"(id), "r"(threads)
      : "memory");
  return all != 0;
}

// ---- thread-block clusters (sm_90) ----------------------------------------------------------------

// This block's rank in its cluster.
__device__ __forceinline__ std::uint32_t cluster_rank() {
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Every thread of every block of the cluster arrives, then waits for all the others: what one block
// wrote to shared memory (barrier initialisations included) is then visible to the others.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Arrives on the mbarrier at the same shared-memory offset as `bar` in block `cta` of the cluster.
__device__ __forceinline__ void mbarrier_arrive_cluster(std::uint64_t* bar, std::uint32_t cta) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_u32(bar)),
      "r"(cta)
      : "memory");
}

// tma_load_2d to every block of the cluster in `mask` (bit i: rank i): the box lands at dst's offset
// in each of them and is counted on the barrier at bar's offset in each.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, int c0, int c1,
                                                      std::uint64_t* bar, std::uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(mask)
      : "memory");
}

// ---- host ------------------------------------------------------------------------------------------

// A tensor as the copy engine sees it: `rank` dimensions, innermost first (dims[0] elements of
// `type` contiguous), the byte strides of dimensions 1 ... rank-1, and the box one request copies.
// Elements outside the tensor read as zeros. Throws kl::NotSupported where the driver cannot.
inline CUtensorMap tensor_map(CUtensorMapDataType type, const void* base, cuuint32_t rank, const cuuint64_t* dims,
                              const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle) {
  static const auto encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !fn) throw kl::NotSupported("the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map{};
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUresult r = encode(&map, type, rank, const_cast<void*>(base), dims, strides, box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw kl::NotSupported("cuTensorMapEncodeTiled refused the tensor (" + std::to_string(r) + ")");
  return map;
}

}  // namespace kl
