// Lesson 07, step 4 (tile part): the softmax on the mma.sync accumulator, in registers. The PTX
// wrappers (kl::mma_16816, kl::ldmatrix_x4, kl::pack_half2) and the fragment layouts are in
// common/ptx.cuh. mma.sync m16n8k16 and ldmatrix need sm_80: below it the kernel is compiled out and
// the launcher refuses the step (n/a); steps 1-3 (WMMA) are the tile ladder there.
#pragma once
#include <string>

#include "common/arch.cuh"
#include "common/ptx.cuh"
#include "common/softmax_math.cuh"
#include "lessons/07_wmma_attention/parts.cuh"

namespace lesson07 {

// Step 3's block with the tile in registers: each tensor arrives with one 16-byte load per lane into
// shared memory, then ldmatrix. S = QKᵀ is two m16n8k16 products whose C fragments hold, per lane, 4
// scores of row g and 4 of row g+8: the row max and sum take 2 shuffles inside the lane's quad, and P
// goes to the second product as its A operand straight from the registers. No float tile in shared
// memory, no WMMA store/load.
__global__ void tile_registers(Problem pr) {
#if KL_ARCH_AT_LEAST(80)
  __shared__ __align__(16) __half sm[kTileWarps][3][kT * kT];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kTileWarps + w;
  if (tile >= pr.batch) return;
  const std::int64_t off = tile * kT * kT;
  __half(*x)[kT * kT] = sm[w];
  reinterpret_cast<uint4*>(x[0])[lane] = reinterpret_cast<const uint4*>(pr.q + off)[lane];
  reinterpret_cast<uint4*>(x[1])[lane] = reinterpret_cast<const uint4*>(pr.k + off)[lane];
  reinterpret_cast<uint4*>(x[2])[lane] = reinterpret_cast<const uint4*>(pr.v + off)[lane];
  __syncwarp();
  // lane l points at row l % 8 of 8×8 matrix l / 8; the matrices in the order the fragments want
  const int mi = lane / 8, r8 = lane % 8;
  std::uint32_t qa[4], kb[4], vb[4];
  kl::ldmatrix_x4(qa, &x[0][((mi % 2) * 8 + r8) * kT + (mi / 2) * 8]);        // A: (rows, cols) 0/0, 8/0, 0/8, 8/8
  kl::ldmatrix_x4(kb, &x[1][((mi / 2) * 8 + r8) * kT + (mi % 2) * 8]);        // B for keys 0-7, then keys 8-15
  kl::ldmatrix_x4_trans(vb, &x[2][((mi % 2) * 8 + r8) * kT + (mi / 2) * 8]);  // B for dims 0-7, then dims 8-15
  float s[2][4] = {};
  kl::mma_16816(s[0], qa, kb[0], kb[1]);
  kl::mma_16816(s[1], qa, kb[2], kb[3]);
  // rows g (elements 0, 1) and g + 8 (elements 2, 3): max and sum over the 4 lanes of the quad
  const float c = pr.scale * kl::kLog2e;
  float m[2], l[2];
  for (int h = 0; h < 2; ++h) {
    m[h] = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
    m[h] = fmaxf(m[h], __shfl_xor_sync(kl::kFullMask, m[h], 1));
    m[h] = fmaxf(m[h], __shfl_xor_sync(kl::kFullMask, m[h], 2));
    l[h] = 0;
    for (int n = 0; n < 2; ++n)
      for (int e = 2 * h; e < 2 * h + 2; ++e) l[h] += s[n][e] = kl::exp2_approx((s[n][e] - m[h]) * c);
    l[h] += __shfl_xor_sync(kl::kFullMask, l[h], 1);
    l[h] += __shfl_xor_sync(kl::kFullMask, l[h], 2);
  }
  const std::uint32_t pa[4] = {kl::pack_half2(s[0][0], s[0][1]), kl::pack_half2(s[0][2], s[0][3]),
                               kl::pack_half2(s[1][0], s[1][1]), kl::pack_half2(s[1][2], s[1][3])};
  float o[2][4] = {};
  kl::mma_16816(o[0], pa, vb[0], vb[1]);
  kl::mma_16816(o[1], pa, vb[2], vb[3]);
  auto* out = reinterpret_cast<std::uint32_t*>(pr.o + off);
  for (int n = 0; n < 2; ++n) {
    out[g * 8 + n * 4 + t] = kl::pack_half2(o[n][0] / l[0], o[n][1] / l[0]);
    out[(g + 8) * 8 + n * 4 + t] = kl::pack_half2(o[n][2] / l[1], o[n][3] / l[1]);
  }
#endif
}

inline void launch_tile_registers(const Problem& p, Workspace&, cudaStream_t s) {
  kl::require_arch<tile_registers>(80);
  tile_registers<<<tile_blocks(p), 32 * kTileWarps, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson07
