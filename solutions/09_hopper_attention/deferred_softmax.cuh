// Exercise 09.2, solved (see exercises/09_hopper_attention for the task).
//
// A term summed so far is 2^(x c - m_old c) = 2^(x c - m_new c) · 2^(m_new c - m_old c), so bringing it
// to the new max multiplies it by alpha = 2^(m_old c - m_new c) <= 1 (0 on the first tile, where m_old
// is -inf). The same factor applies to l and, once the P·V in flight is done, to O; deferring it costs
// nothing, since alpha depends only on the two maxima. The loops are unrolled so that s stays in
// registers (an index known only at run time would move it to local memory).
#pragma once

__device__ __forceinline__ void softmax_deferred(float (&s)[32], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                 float c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mt = m[h];
#pragma unroll
    for (int j = 0; j < 8; ++j) mt = fmaxf(mt, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 1));
    mt = fmaxf(mt, __shfl_xor_sync(kl::kFullMask, mt, 2));
    const float mc = mt == -INFINITY ? 0.f : mt * c;  // a row that has seen only -inf keys stays at 0
    alpha[h] = kl::exp2_approx(m[h] * c - mc);
    m[h] = mt;
    float sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) sum += s[4 * j + e] = kl::exp2_approx(fmaf(s[4 * j + e], c, -mc));
    l[h] = l[h] * alpha[h] + sum;
  }
}
