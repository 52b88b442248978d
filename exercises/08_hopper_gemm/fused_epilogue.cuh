// Exercise 08.2: step 7's fused epilogue, D = act(α·A·B + β·C + bias) in the one store of D.
//
// When a warpgroup's wgmmas for a tile are done, each thread holds pairs of neighbouring accumulators:
// v0 and v1, the sums A·B at (row, col) and (row, col + 1), col even. The steps before step 7 store
// α·acc + β·C and leave the bias and the activation to a second kernel that reads D and writes it
// again; step 7 finishes the pair in registers, so D is written once. store_pair_fused is called for
// every pair of the tile, including those of a tile's edge past M or N. T is __nv_bfloat16 or __half;
// lesson08::Elem<T> converts (unpair: a pair of T to a float2, pair: two floats to a pair of T). As
// written it stores α·acc: right only when β = 0, there is no bias and act is none.
//
// TODO, for the pair at (row, col):
//   1. β·C: add p.beta times C at the same place, only when p.beta != 0 (p.c is null then); read
//      both values with one 4-byte load of an Elem<T>::Pair, as D is stored;
//   2. the bias: add p.bias[col] and p.bias[col + 1] when p.bias is not null;
//   3. the activation, last: lesson08::activate_fast(p.act, x) (tanh.approx for gelu_tanh).
// Grade it: scripts/grade.sh 08.2
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
  // TODO 1, 2 and 3
  *reinterpret_cast<Pair*>(static_cast<T*>(p.d) + e) = lesson08::Elem<T>::pair(v0, v1);
}
