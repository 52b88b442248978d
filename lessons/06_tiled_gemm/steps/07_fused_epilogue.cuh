// Lesson 06, step 7: the epilogue fused into step 6's kernel, compiled per combination. Step 7 runs
// gemm_warp_tiled<Tuned, Fused<B, A, HasC>> (steps/06_warp_tiled.cuh) on the whole problem instead of
// its GEMM part; gemm.cuh's with_epilogue picks the Fused type for a problem's bias, activation and
// beta, once per call.
#pragma once
#include <cstdint>

#include "lessons/06_tiled_gemm/parts.cuh"

namespace lesson06 {

// The activation of one value, and the bias of output (m, n): the pieces of Fused, and of the
// product's Runtime (gemm.cuh).
template <Act A>
__host__ __device__ __forceinline__ float activate(float x, float slope) {
  if constexpr (A == Act::relu) return x < 0.f ? 0.f : x;  // NaN stays NaN
  else if constexpr (A == Act::leaky) return x < 0.f ? slope * x : x;
  else if constexpr (A == Act::gelu_tanh) return 0.5f * x * (1.f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
  else if constexpr (A == Act::gelu_erf) return 0.5f * x * (1.f + erff(x * 0.7071067812f));
  else return x;
}

template <Bias B>
__device__ __forceinline__ float bias_at(const Problem& p, int m, int n) {
  if constexpr (B == Bias::m) return p.bias[m];
  else if constexpr (B == Bias::n) return p.bias[n];
  else if constexpr (B == Bias::full) return p.bias[std::int64_t{m} * p.n + n];
  else return 0.f;
}

// The fused epilogue as template arguments: each (bias, activation, beta·C) combination is its own
// kernel, so the code that runs holds no branch on them (Runtime, the product's fallbacks in gemm.cuh:
// a switch per element).
template <Bias B, Act A, bool HasC>
struct Fused {
  static __device__ __forceinline__ float apply(const Problem& p, float acc, int m, int n) {
    float v = p.alpha * acc;
    if constexpr (HasC) v = fmaf(p.beta, p.c[std::int64_t{m} * p.ldc + n], v);
    if constexpr (B != Bias::none) v += bias_at<B>(p, m, n);
    return activate<A>(v, p.slope);
  }
};

// The plain GEMM (alpha·A·B, no C, no bias, no activation): what step 6 and split-K's slices compile.
using NoEpilogue = Fused<Bias::none, Act::none, false>;

}  // namespace lesson06
