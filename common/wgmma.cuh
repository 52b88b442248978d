// wgmma, the Hopper warpgroup matrix multiply, as thin PTX wrappers. wgmma is issued by a warpgroup
// (4 consecutive warps, 128 threads) and reads its B operand, and A unless A comes from registers,
// from shared memory through a 64-bit descriptor; the tiles there are in the 128-byte swizzled layout
// that TMA also writes. Needs sm_90a: compiled only into targets built for it (lessons 08 and 09).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

// The f32 accumulators of a wgmma as "+f" asm operands %0 ... %(N - 1): N = 32, 64 or 128 registers a
// thread (n = 64, 128 or 256 columns).
#define KL_WGMMA_F8(d, i)                                                                                     \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define KL_WGMMA_F32(d, i) KL_WGMMA_F8(d, i), KL_WGMMA_F8(d, i + 8), KL_WGMMA_F8(d, i + 16), KL_WGMMA_F8(d, i + 24)
#define KL_WGMMA_D32(d) KL_WGMMA_F32(d, 0)
#define KL_WGMMA_D64(d) KL_WGMMA_F32(d, 0), KL_WGMMA_F32(d, 32)
#define KL_WGMMA_D128(d) KL_WGMMA_F32(d, 0), KL_WGMMA_F32(d, 32), KL_WGMMA_F32(d, 64), KL_WGMMA_F32(d, 96)

namespace kl {

// A tile in shared memory is stored as panels of [rows][64 f16] = 128 bytes a row; within a panel
// the 16-byte chunk c of row r sits at chunk c ^ (r % 8) (the 128-byte swizzle: the 8 rows of a
// 1024-byte atom spread one column over all banks). Panels and atoms must start 1024-byte aligned.
constexpr int kPanelCols = 64, kRowBytes = 128, kAtomBytes = 1024;

__device__ __forceinline__ int swizzled(int row, int chunk) { return row * kRowBytes + ((chunk ^ (row % 8)) << 4); }

// The wgmma shared-memory descriptor: start address, leading and stride byte offsets (all >> 4), and
// the 128-byte swizzle mode (1 in bits 62-63). K-major tiles: the stride offset is the 8-row atom
// (1024 B), the leading one unused. MN-major tiles: the stride offset steps 8 k-rows (1024 B), the
// leading one steps from one 64-column panel to the next. (Both measured on the H100: probe in NOTES.md.)
__device__ __forceinline__ std::uint64_t smem_desc(const void* p, std::uint32_t leading, std::uint32_t stride) {
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<std::uint64_t>((leading >> 4) & 0x3FFF) << 16 |
         static_cast<std::uint64_t>((stride >> 4) & 0x3FFF) << 32 | std::uint64_t{1} << 62;
}

// Orders this thread's register writes (accumulators, A fragments) before the next wgmma reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the group of wgmmas issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed groups are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's ordinary shared-memory writes (stores, cp.async) visible to the async proxy
// that wgmma and TMA read through.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// D[64 x 64] (+)= A[64 x 16] * B[64 x 16]^T, both K-major in shared memory (rows of 16 contiguous
// k values: Q and K as they lie in memory). accumulate = 0 overwrites D.
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%"
      "30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : KL_WGMMA_D32(d)
      : "l"(a), "l"(b), "r"(accumulate));
}

// D[64 x 128] (+)= A[64 x 16] * B, f16, both from shared memory, A K-major; B K-major ([128 x 16]^T:
// rows of K as they lie in memory) with kTransB = 0, MN-major ([16 x 128], read through the transpose
// bit) with kTransB = 1. accumulate = 0 overwrites D.
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_f16_ss(float (&d)[64], std::uint64_t a, std::uint64_t b,
                                                        int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%"
      "30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%"
      "58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
      : KL_WGMMA_D64(d)
      : "l"(a), "l"(b), "r"(accumulate), "n"(kTransB));
}

// D[64 x 128] (+)= A[64 x 16] * B[128 x 16]^T, both K-major in shared memory (Q and 128 rows of K as they
// lie in memory). accumulate = 0 overwrites D.
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], std::uint64_t a, std::uint64_t b, int accumulate) {
  wgmma_m64n128k16_f16_ss<0>(d, a, b, accumulate);
}

// D[64 x 64] (+)= A[64 x 16] * B[16 x 64]: A from registers (f16 pairs, mma.sync's A layout), B in shared
// memory MN-major (its 64 columns contiguous: V as it lies in memory), read through the transpose bit.
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t b,
                                                   int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%"
      "30,%31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : KL_WGMMA_D32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

// D[64 x 128] (+)= A[64 x 16] * B[16 x 128]: A from registers (f16 pairs, mma.sync's A layout), B in shared
// memory MN-major (its 128 columns contiguous: V as it lies in memory), read through the transpose bit.
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t b,
                                                    int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%"
      "30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%"
      "58,%59,%60,%61,%62,%63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : KL_WGMMA_D64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

// setmaxnreg: this warpgroup's registers per thread become N (a multiple of 8 in 24 ... 256). .dec gives
// registers back to the block's pool, .inc takes them from it (only what a .dec released). Takes effect
// only in a kernel with a register cap at entry (__launch_bounds__(threads, 1)).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// D[64 x N] (+)= A[64 x 16] * B[16 x N] for the GEMM of lesson 08: A K-major (rows of 16 contiguous k:
// a row-major [M, K] matrix), B MN-major (rows of N contiguous columns: a row-major [K, N] matrix), read
// through the transpose bit; both from shared memory, T = __half or __nv_bfloat16, f32 accumulators.
template <int N, class T>
__device__ __forceinline__ void wgmma_ss_kn(float (&d)[N / 2], std::uint64_t a, std::uint64_t b, int accumulate);

template <>
__device__ __forceinline__ void wgmma_ss_kn<128, __half>(float (&d)[64], std::uint64_t a, std::uint64_t b,
                                                         int accumulate) {
  wgmma_m64n128k16_f16_ss<1>(d, a, b, accumulate);
}

template <>
__device__ __forceinline__ void wgmma_ss_kn<128, __nv_bfloat16>(float (&d)[64], std::uint64_t a, std::uint64_t b,
                                                                int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%"
      "30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%"
      "58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 1;\n}\n"
      : KL_WGMMA_D64(d)
      : "l"(a), "l"(b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_ss_kn<256, __half>(float (&d)[128], std::uint64_t a, std::uint64_t b,
                                                         int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%"
      "30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%"
      "58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%"
      "86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%"
      "111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, "
      "1;\n}\n"
      : KL_WGMMA_D128(d)
      : "l"(a), "l"(b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_ss_kn<256, __nv_bfloat16>(float (&d)[128], std::uint64_t a, std::uint64_t b,
                                                                int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%"
      "30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%"
      "58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%"
      "86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%"
      "111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, "
      "1;\n}\n"
      : KL_WGMMA_D128(d)
      : "l"(a), "l"(b), "r"(accumulate));
}

}  // namespace kl
