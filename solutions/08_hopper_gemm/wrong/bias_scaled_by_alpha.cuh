// A wrong technique for exercise 08.2, kept to test the grader: the bias is added to the accumulators
// before α scales them, so D gets α·bias instead of bias (right only when α = 1). It must fail the
// check.
#pragma once
#include <cstdint>

#include "lessons/08_hopper_gemm/parts.cuh"

template <class T>
__device__ __forceinline__ void store_pair_fused(const lesson08::Problem& p, int row, int col, float v0, float v1) {
  using Pair = typename lesson08::Elem<T>::Pair;
  if (row >= p.m || col >= p.n) return;
  const std::int64_t e = static_cast<std::int64_t>(row) * p.n + col;
  if (p.bias) {
    v0 += p.bias[col];
    v1 += p.bias[col + 1];
  }
  v0 *= p.alpha;
  v1 *= p.alpha;
  if (p.beta != 0.f) {
    const float2 c = lesson08::Elem<T>::unpair(*reinterpret_cast<const Pair*>(static_cast<const T*>(p.c) + e));
    v0 += p.beta * c.x;
    v1 += p.beta * c.y;
  }
  v0 = lesson08::activate_fast(p.act, v0);
  v1 = lesson08::activate_fast(p.act, v1);
  *reinterpret_cast<Pair*>(static_cast<T*>(p.d) + e) = lesson08::Elem<T>::pair(v0, v1);
}
