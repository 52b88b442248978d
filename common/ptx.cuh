// Thin wrappers over the PTX instructions the tensor-core and pipelined lessons (06, 07) use, one
// behaviour each. They need sm_80 (cp.async, mma.m16n8k16, ldmatrix): a step using them is compiled
// only for sm_80 and newer.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace kl {

// ---- cp.async: global -> shared without passing through registers -----------------------------------
// `src_bytes` below the copy's size fill the rest of the destination with zeros (0: nothing is read),
// which is how tails are handled. A thread's copies are committed as one group, and
// cp_async_wait<N>() waits until at most N of its groups are still in flight.

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// The element type is kept (a template, not void*): the compiler then selects between source pointers
// without a branch.
// 4 bytes, kept in L1 too (.ca): for scattered element-wise loads such as a transposed tile.
template <class T>
__device__ __forceinline__ void cp_async4(T* dst, const T* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}

// 16 bytes, straight to shared memory (.cg bypasses L1).
template <class T>
__device__ __forceinline__ void cp_async16(T* dst, const T* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- mma.sync m16n8k16: f16 inputs, f32 accumulator -------------------------------------------------
// Fragment layouts, with g = lane / 4 and t = lane % 4 (PTX ISA, "Matrix Fragments for mma.m16n8k16"):
//   A (16x16, row-major) a[0..3]: rows g, g+8, g, g+8 at columns 2t..2t+1, 2t..2t+1, 2t+8.., 2t+8..
//   B (16x8, "col")     b[0..1]: column g, rows 2t..2t+1 and 2t+8..2t+9
//   C (16x8, f32)       c[0..3]: row g cols 2t, 2t+1; row g+8 cols 2t, 2t+1
// Each a[i] / b[i] register holds two halves. The C of two neighbouring n-tiles is exactly the A
// layout of the next product, so a result can feed the next mma without leaving the registers.
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same with bf16 inputs (8 exponent bits, 7 mantissa bits), fragments laid out as above.
__device__ __forceinline__ void mma_16816_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                               std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- ldmatrix: four 8x8 f16 matrices from shared memory into mma fragments --------------------------
// Lane l gives the address of row l % 8 of matrix l / 8 and receives, of each matrix, row l / 4,
// columns 2(l % 4)..+1 (.trans: column l / 4, rows 2(l % 4)..+1).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(smem)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(smem)));
}

// Two floats rounded to f16 in one 32-bit register (lo in the low half): an mma A/B register.
__device__ __forceinline__ std::uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&h);
}

}  // namespace kl
