// Step 1: three kernels, one thread per row. The plain definition of a numerically safe softmax:
// the row's max, the sum of e^(x - max), then e^(x - max) / sum, each walk a kernel of its own.
#pragma once
#include <algorithm>
#include <cstdint>

#include "lessons/04_online_softmax/parts.cuh"

namespace lesson04 {

// Step 1a: thread r walks row r for its max. The 32 threads of a warp read addresses K elements
// apart, so each warp-wide load touches 32 cache lines: correct, and far from the copy bandwidth.
template <class T>
__global__ void softmax_three_kernels_max(const T* x, std::int64_t rows, int cols, float scale, float* row_max) {
  const std::int64_t r = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  float m = -INFINITY;
  for (int c = 0; c < cols; ++c) m = kl::max_nan(m, kl::to_float(x[r * cols + c]) * scale);
  row_max[r] = m;
}

// Step 1b: a second walk sums e^(x - max). Subtracting the max keeps every exponent <= 0, so e^x
// cannot overflow however large x is (the "safe" softmax); expf is the accurate, slow exponential.
// One thread adds all K terms: a plain float sum drifts by up to ~K * 2^-24 (NOTES.md, step 1), so
// Kahan's compensation carries each add's rounding error forward.
template <class T>
__global__ void softmax_three_kernels_sum(const T* x, std::int64_t rows, int cols, float scale, const float* row_max,
                                          float* row_sum) {
  const std::int64_t r = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  float s = 0.f, lost = 0.f;  // lost: what the last add rounded away
  for (int c = 0; c < cols; ++c) {
    const float term = expf(kl::to_float(x[r * cols + c]) * scale - row_max[r]) - lost;
    const float t = s + term;
    lost = (t - s) - term;
    s = t;
  }
  row_sum[r] = s;
}

// Step 1c: a third walk writes e^(x - max) / sum. Three reads and one write of every element.
template <class T>
__global__ void softmax_three_kernels_normalise(const T* x, T* y, std::int64_t rows, int cols, float scale,
                                                const float* row_max, const float* row_sum) {
  const std::int64_t r = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  for (int c = 0; c < cols; ++c)
    y[r * cols + c] = kl::from_float<T>(expf(kl::to_float(x[r * cols + c]) * scale - row_max[r]) / row_sum[r]);
}

// The three kernels for element type T; stats holds the rows' max and sum between them.
template <class T>
void launch_three_kernels_t(const Problem& p, kl::DeviceBuffer<float>& stats, cudaStream_t s) {
  stats.resize(2 * static_cast<std::size_t>(p.rows));  // allocates in the untimed check run only
  float* row_max = stats.data();
  float* row_sum = row_max + p.rows;
  const auto* x = static_cast<const T*>(p.x);
  const int cols = static_cast<int>(p.cols);
  const auto grid = static_cast<unsigned>((p.rows + 255) / 256);
  softmax_three_kernels_max<<<grid, 256, 0, s>>>(x, p.rows, cols, p.scale, row_max);
  CUDA_CHECK_LAUNCH();
  softmax_three_kernels_sum<<<grid, 256, 0, s>>>(x, p.rows, cols, p.scale, row_max, row_sum);
  CUDA_CHECK_LAUNCH();
  softmax_three_kernels_normalise<<<grid, 256, 0, s>>>(x, static_cast<T*>(p.y), p.rows, cols, p.scale, row_max,
                                                       row_sum);
  CUDA_CHECK_LAUNCH();
}

// The launcher of the step table: nothing to do for an empty problem, else the kernels for the
// problem's dtype.
inline void launch_three_kernels(const Problem& p, Workspace& ws, cudaStream_t s) {
  if (empty(p)) return;
  with_type(p.dtype, [&](auto t) { launch_three_kernels_t<decltype(t)>(p, ws.stats, s); });
}

}  // namespace lesson04
