// Lesson 08, the pieces several steps share, each naming the step that introduces it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "lessons/08_hopper_gemm/problem.cuh"

namespace lesson08 {

// Step 1: the element type's conversions. Storage is 16 bits, arithmetic f32.
template <class T>
struct Elem;
template <>
struct Elem<__half> {
  using Pair = __half2;
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ Pair pair(float lo, float hi) { return __floats2half2_rn(lo, hi); }
  static __device__ __forceinline__ float2 unpair(Pair x) { return __half22float2(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
};
template <>
struct Elem<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ Pair pair(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
  static __device__ __forceinline__ float2 unpair(Pair x) { return __bfloat1622float2(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};

// Step 1: the plain epilogue every GEMM step ends with: D[row, col..col+1] = α·acc + β·C, for the two
// neighbouring columns one accumulator pair holds (col even, N even: one 4-byte store). Rows and columns
// past the matrix are skipped.
template <class T>
__device__ __forceinline__ void store_pair(const Problem& p, int row, int col, float v0, float v1) {
  if (row >= p.m || col >= p.n) return;
  const std::int64_t e = static_cast<std::int64_t>(row) * p.n + col;
  v0 *= p.alpha;
  v1 *= p.alpha;
  if (p.beta != 0.f) {
    const float2 c = Elem<T>::unpair(*reinterpret_cast<const typename Elem<T>::Pair*>(static_cast<const T*>(p.c) + e));
    v0 += p.beta * c.x;
    v1 += p.beta * c.y;
  }
  *reinterpret_cast<typename Elem<T>::Pair*>(static_cast<T*>(p.d) + e) = Elem<T>::pair(v0, v1);
}

// Step 1: the activation, gelu_tanh(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), with tanhf
// (accurate to an ulp or two, ~20 instructions): the f32 reference's and the CUDA-core fallback's.
__device__ __forceinline__ float activate(Act act, float x) {
  if (act == Act::relu) return x > 0.f ? x : 0.f;
  if (act == Act::gelu_tanh) return 0.5f * x * (1.f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
  return x;
}

// Step 6: the same with tanh.approx.f32, one instruction of the special-function unit (relative error
// below 2^-10, far under bf16's rounding): the tensor-core steps' epilogue, which must not hold up the
// next tile's wgmmas.
__device__ __forceinline__ float activate_fast(Act act, float x) {
  if (act == Act::relu) return x > 0.f ? x : 0.f;
  if (act == Act::gelu_tanh) {
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(0.7978845608f * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.f + t);
  }
  return x;
}

// Step 6: the fused epilogue, D[row, col..col+1] = act(α·acc + β·C + bias[col]), in one pass: the
// other steps store α·acc + β·C and leave bias and activation to a second kernel (epilogue_kernel).
// Step 7: act(α·acc + β·C + bias) of the pair at (row, col), col even; C and the bias are read only
// inside D (the pairs of a tile's edge past M or N are finished but never stored).
template <class T>
__device__ __forceinline__ float2 finish_pair(const Problem& p, int row, int col, float v0, float v1) {
  v0 *= p.alpha;
  v1 *= p.alpha;
  const bool inside = row < p.m && col < p.n;
  if (p.beta != 0.f && inside) {
    const std::int64_t e = static_cast<std::int64_t>(row) * p.n + col;
    const float2 c = Elem<T>::unpair(*reinterpret_cast<const typename Elem<T>::Pair*>(static_cast<const T*>(p.c) + e));
    v0 += p.beta * c.x;
    v1 += p.beta * c.y;
  }
  if (p.bias && inside) {
    v0 += p.bias[col];
    v1 += p.bias[col + 1];
  }
  return {activate_fast(p.act, v0), activate_fast(p.act, v1)};
}

template <class T>
__device__ __forceinline__ void store_pair_fused(const Problem& p, int row, int col, float v0, float v1) {
  if (row >= p.m || col >= p.n) return;
  const float2 v = finish_pair<T>(p, row, col, v0, v1);
  *reinterpret_cast<typename Elem<T>::Pair*>(static_cast<T*>(p.d) + static_cast<std::int64_t>(row) * p.n + col) =
      Elem<T>::pair(v.x, v.y);
}

// Step 2: the tiles of a block, in the order blockIdx.x walks them. Groups of kGroupRows tile rows are
// walked column by column, so the blocks running at once share their B tiles and a few A tiles in L2.
struct TileOrder {
  int tiles_m, tiles_n;
  static constexpr int kGroupRows = 8;
  __host__ __device__ int count() const { return tiles_m * tiles_n; }
  __device__ void tile(int t, int& tm, int& tn) const {
    const int per_group = kGroupRows * tiles_n, group = t / per_group;
    const int first = group * kGroupRows, rows = min(tiles_m - first, kGroupRows);
    tm = first + (t % per_group) % rows;
    tn = (t % per_group) / rows;
  }
};

}  // namespace lesson08
