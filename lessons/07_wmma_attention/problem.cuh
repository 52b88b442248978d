// Lesson 07, the problem: attention O = softmax(Q·Kᵀ·scale)·V for Q, K, V [B, H, S, D] in f16, with
// f32 accumulation and an f16 output. Two parts: the tile (B independent 16×16×16 attentions, H = 1,
// S = D = 16) and flash (long sequences, D = 64 or 128, causal or not). Here: the shape as the kernels
// see it and its validation. The inputs, the float64 (CPU) and f32 (GPU, sampled rows) references, the
// error measure and the shapes the executable runs are in host.cuh.
#pragma once
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "common/check.cuh"

namespace lesson07 {

// Q, K, V and O are [batch, heads, seq, dim] f16, contiguous. Row i of a head attends to keys
// j <= i when causal (the mask is top-left aligned: query i and key i are the same position).
struct Problem {
  const __half *q = nullptr, *k = nullptr, *v = nullptr;
  __half* o = nullptr;
  std::int64_t batch = 0;
  int heads = 1, seq = 16, dim = 16;
  bool causal = false;
  float scale = 0.25f;  // 1 / sqrt(dim) unless asked otherwise

  __host__ __device__ std::int64_t heads_total() const { return batch * heads; }
  __host__ __device__ std::int64_t rows() const { return batch * heads * seq; }
  __host__ __device__ std::int64_t elements() const { return rows() * dim; }
};

enum class Part { tile, flash };

inline const char* part_name(Part p) { return p == Part::tile ? "tile" : "flash"; }

// Useful FLOPs: two GEMMs of 2·S·S·D per head; causal attention needs only half of them.
inline double flops(const Problem& p) {
  const double f = 4.0 * static_cast<double>(p.heads_total()) * p.seq * static_cast<double>(p.seq) * p.dim;
  return p.causal ? f / 2 : f;
}

// The fewest bytes: Q, K, V read once and O written once (f16).
inline double bytes(const Problem& p) { return 4.0 * static_cast<double>(p.elements()) * 2.0; }

// B·H·S·D elements at most (8 TiB for the four tensors), and B·H heads at most what the launches and
// the library's batched GEMMs index with an int.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 40, kMaxHeads = 0x7fffffff;

// Refuses a shape no step of the part can take, before anything is launched (exit 2 in the driver).
inline void validate(const Problem& p, Part part) {
  if (p.batch < 1 || p.heads < 1 || p.seq < 1) throw kl::UsageError("B, H and S must be at least 1");
  if (!(p.scale > 0) || !std::isfinite(p.scale)) throw kl::UsageError("the scale must be a positive finite number");
  kl::checked_product({p.batch, p.heads, p.seq, p.dim}, kMaxElements, "B * H * S * D");
  kl::checked_product({p.batch, p.heads}, kMaxHeads, "B * H");
  if (part == Part::tile) {
    if (p.heads != 1 || p.seq != 16 || p.dim != 16 || p.causal)
      throw kl::UsageError("the tile part is B independent 16x16x16 problems: H = 1, S = D = 16, not causal");
    return;
  }
  if (p.dim != 64 && p.dim != 128)
    throw kl::UsageError("D = " + std::to_string(p.dim) + ": the flash steps are compiled for D = 64 and D = 128 only");
}

}  // namespace lesson07
