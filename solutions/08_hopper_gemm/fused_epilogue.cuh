// Exercise 08.2, solved (see exercises/08_hopper_gemm for the task).
//
// The order is the definition's: scale the product by α, add β·C and the column's bias, and only then
// apply the activation, which is not linear (relu and gelu of a sum are not the sum of relus). C is
// read only when β != 0, because p.c may be null then, and with one 4-byte load per pair, as D is
// written. tanh.approx (activate_fast) is one instruction of the special-function unit; its error,
// below 2^-10, is far under the rounding of a bf16 D. Everything happens in registers before the one
// store: D is written once instead of written, read and written again by a second kernel.
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/parts.cuh"

template <class T>
__device__ __forceinline__ void store_pair_fused(const lesson08::Problem& p, int row, int col, float v0, float v1) {
  using Pair = typename lesson08::Elem<T>::Pair;
  if (row >= p.m || col >= p.n) return;  // a pair of the tile's edge, past D: neither read nor stored
  const std::int64_t e = static_cast<std::int64_t>(row) * p.n + col;
  v0 *= p.alpha;
  v1 *= p.alpha;
  if (p.beta != 0.f) {
    const float2 c = lesson08::Elem<T>::unpair(*reinterpret_cast<const Pair*>(static_cast<const T*>(p.c) + e));
    v0 += p.beta * c.x;
    v1 += p.beta * c.y;
  }
  if (p.bias) {
    v0 += p.bias[col];
    v1 += p.bias[col + 1];
  }
  v0 = lesson08::activate_fast(p.act, v0);
  v1 = lesson08::activate_fast(p.act, v1);
  *reinterpret_cast<Pair*>(static_cast<T*>(p.d) + e) = lesson08::Elem<T>::pair(v0, v1);
}
