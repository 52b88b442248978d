// Lesson 04, the problem: y[r, :] = softmax(x[r, :] * scale) for every row r of an [M, K] matrix, in
// f32, f16 or bf16 (loads in the input type, arithmetic in float, stores in the input type). Here: the
// problem as the steps see it. The float64 reference, the tolerance and error measure, the shapes the
// executable runs and its inputs are in host.cuh.
#pragma once
#include <climits>
#include <cstdint>

#include "common/pack.cuh"

namespace lesson04 {

using namespace kl::dtypes;  // Dtype, dtype_of, with_type, ... (common/pack.cuh)

// One softmax call: x and y point at rows x cols elements of dtype, row after row.
struct Problem {
  const void* x = nullptr;
  void* y = nullptr;
  std::int64_t rows = 0, cols = 0;
  Dtype dtype = Dtype::f32;
  float scale = 1.f;  // softmax(x * scale): attention passes 1/sqrt(d) here
};

// Nothing to do, so nothing is launched.
inline bool empty(const Problem& p) { return p.rows <= 0 || p.cols <= 0; }

// The longest row: the block steps index a row in int, and a thread of steps 4-5 steps through its
// packs 512 at a time (for_my_packs, parts.cuh), so with packs of 1 it reaches K - 1 + 511.
constexpr std::int64_t kMaxCols = std::int64_t{INT_MAX} - 511;  // 2^31 - 512

}  // namespace lesson04
