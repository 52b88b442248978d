// Lesson 08, the problem as the kernels see it: D = act(α·A·B + β·C + bias) with A [M, K] and B [K, N]
// row-major in bf16 (the default) or f16, f32 accumulation, C and D [M, N] in the same type, bias one f32
// per column of D (or none) and act none, relu or gelu_tanh. Any M, N, K >= 1. The tensor-core steps read
// rows in whole 16-byte chunks (cp.async, TMA), so they need K and N to be multiples of 8 and say n/a
// otherwise; the product's gemm() takes every shape. CUDA only: the executable's side is host.cuh.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "common/check.cuh"

namespace lesson08 {

enum class Dtype { bf16, f16 };
enum class Act { none, relu, gelu_tanh };

struct Problem {
  int m = 0, n = 0, k = 0;
  Dtype dtype = Dtype::bf16;
  float alpha = 1.f, beta = 0.f;
  Act act = Act::none;
  const void* a = nullptr;      // [M, K]
  const void* b = nullptr;      // [K, N]
  const void* c = nullptr;      // [M, N], read only when beta != 0
  void* d = nullptr;            // [M, N]
  const float* bias = nullptr;  // [N], one value per column of D; null: no bias

  bool epilogue() const { return bias != nullptr || act != Act::none; }
};

// Each of M·K, K·N and M·N at most 2^37 elements (256 GiB of 16-bit values): the kernels index in 64
// bits, and the tile count of the largest shape stays far inside a grid's 2^31 - 1 blocks.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 37;

inline const char* dtype_name(Dtype t) { return t == Dtype::bf16 ? "bf16" : "f16"; }
inline const char* act_name(Act a) { return a == Act::none ? "none" : a == Act::relu ? "relu" : "gelu_tanh"; }

// Refuses what no kernel can take, before any launch (exit 2 from the executable).
inline void validate(const Problem& p) {
  if (p.m < 1 || p.n < 1 || p.k < 1) throw kl::UsageError("M, N and K must be >= 1");
  const std::int64_t m = p.m, n = p.n, k = p.k;
  if (m * k > kMaxElements || k * n > kMaxElements || m * n > kMaxElements)
    throw kl::UsageError("M*K, K*N and M*N must each be at most 2^37 elements");
  if (!std::isfinite(p.alpha) || !std::isfinite(p.beta)) throw kl::UsageError("alpha and beta must be finite");
}

// The tensor-core steps' condition: every row of A, B, C and D starts on a 16-byte boundary.
inline bool rows_aligned(const Problem& p) { return p.k % 8 == 0 && p.n % 8 == 0; }

inline void require_aligned(const Problem& p) {
  if (!rows_aligned(p))
    throw kl::NotSupported("K and N must be multiples of 8 (rows of whole 16-byte chunks); gemm() takes this shape");
}

inline double flops(const Problem& p) { return 2.0 * p.m * static_cast<double>(p.n) * p.k; }

}  // namespace lesson08
