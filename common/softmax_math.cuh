// The arithmetic every softmax of the ladder shares (lessons 04, 05, 07): a max that keeps NaN, the
// exponentials, and the online (max, sum) state with its combine. One behaviour per function.
#pragma once
#include <cmath>

namespace kl {

constexpr float kLog2e = 1.4426950408889634f;

// max(a, b) that returns NaN when either is NaN (fmaxf would drop it): a NaN anywhere in a row must
// reach every output. Compare and select: three instructions, which the compiler schedules freely.
__host__ __device__ __forceinline__ float max_nan(float a, float b) { return (a != a || a > b) ? a : b; }

// The same result in one instruction on sm_80+ (max.NaN), reached only through inline PTX, which the
// compiler cannot see through: fewer instructions, but a different schedule around it. Each lesson
// uses the form its measurements chose (lessons 04 and 05, NOTES.md: "the NaN-keeping max").
__host__ __device__ __forceinline__ float max_nan_1op(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return max_nan(a, b);
#endif
}

// e^x. On the GPU __expf: a multiply by log2(e) and the SFU's ex2.approx, 5 SASS instructions on
// sm_90 (a compare and two multiplies bring results below 2^-126 out as subnormals) against ~10 for
// expf. Relative error about 2^-22 plus |x| * 2^-24 (the rounding of x * log2(e)), at most ~1e-5 for
// the x in [-87, 0] softmax feeds it.
__host__ __device__ __forceinline__ float fast_exp(float x) {
#ifdef __CUDA_ARCH__
  return __expf(x);
#else
  return std::exp(x);
#endif
}

// 2^x in one SFU instruction (ex2.approx.ftz; x = -inf gives 0). The caller folds log2(e) into a
// multiply it already does, e.g. the softmax scale of attention.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// e^x as 2^(x log2 e) without the subnormal fix-up __expf carries (a term below 2^-126 next to the
// max's term 1 changes no float sum).
__device__ __forceinline__ float exp_ftz(float x) { return exp2_approx(x * kLog2e); }

// The online softmax state of a part of a row: its max m, and s = sum of e^(x - m) over the part.
// A part that has seen no finite value is (-inf, 0).
struct MaxSum {
  float m, s;
};

// Two parts merged: the new max is the larger one, and each sum is rescaled to it,
//   m = max(m1, m2),  s = s1 e^(m1 - m) + s2 e^(m2 - m)
// because e^(x - m1) e^(m1 - m) = e^(x - m). A part with m = -inf adds nothing: its term is written
// as 0, since 0 * e^(-inf - -inf) would be NaN. A NaN in either part stays.
__host__ __device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = max_nan(a.m, b.m);
  const float sa = a.m == -INFINITY ? 0.f : a.s * fast_exp(a.m - m);
  const float sb = b.m == -INFINITY ? 0.f : b.s * fast_exp(b.m - m);
  return {m, sa + sb};
}

}  // namespace kl
