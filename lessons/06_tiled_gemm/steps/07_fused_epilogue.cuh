// Lesson 06, step 7: the epilogue fused into step 6's kernel, compiled per combination. Step 7 runs
// gemm_warp_tiled<Tuned, Fused<B, A, HasC>> (steps/06_warp_tiled.cuh) on the whole problem instead of
// its GEMM part; gemm.cuh's with_epilogue picks the Fused type for a problem's bias, activation and
// beta, once per call.
#pragma once
#include <cstdint>

#include "lessons/06_tiled_gemm/parts.cuh"

namespace lesson06 {

// The fused epilogue as template arguments: each (bias, activation, beta·C) combination is its own
// kernel, so the code that runs holds no branch on them (Runtime, steps 1-5: a switch per element).
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
