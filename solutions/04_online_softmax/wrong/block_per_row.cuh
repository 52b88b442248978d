// A wrong technique for exercise 04.2, kept to test the grader: the skeleton's block per row, as in
// step 3. Right, but a 32-float row leaves three of the block's four warps idle and pays two block
// reductions. Prediction from results/h100/lesson04.csv: step 3 takes 2.51 ms against step 2's
// 0.187 ms at 2097152 x 32 f32, and the solution's warp per row is at most ~0.3 ms there: about 0.1
// of the solution's speed (0.2 at most). Measured on the H100: 0.16 (exercises/README.md).
#pragma once
#include <cstdint>

#include "common/block.cuh"
#include "common/softmax_math.cuh"

constexpr int kRowThreads = 128;

__global__ void softmax_warp_per_row(const float* x, float* y, std::int64_t rows, int cols) {
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += kRowThreads) m = kl::max_nan(m, xr[c]);
    m = kl::block_allreduce<kRowThreads, kl::MaxOp>(m);
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += kRowThreads) s += kl::fast_exp(xr[c] - m);
    s = kl::block_allreduce<kRowThreads>(s);
    for (int c = threadIdx.x; c < cols; c += kRowThreads) yr[c] = kl::fast_exp(xr[c] - m) / s;
  }
}
