// A wrong technique for exercise 09.2, kept to test the grader: alpha is right (so O is rescaled) but
// the running sum is not, so every row whose max grows is divided by too large a sum. It must fail
// the check.
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
    const float mc = mt == -INFINITY ? 0.f : mt * c;
    alpha[h] = kl::exp2_approx(m[h] * c - mc);
    m[h] = mt;
    float sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) sum += s[4 * j + e] = kl::exp2_approx(fmaf(s[4 * j + e], c, -mc));
    l[h] = l[h] + sum;
  }
}
