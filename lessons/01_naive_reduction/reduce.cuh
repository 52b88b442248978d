// Lesson 01 — naive reductions: the sum of n floats, climbing from one thread to one atomic per block.
// Every step has the same launcher signature, so main.cu and test.cu walk one table of steps.
#pragma once
#include <cstddef>

#include "common/device.cuh"
#include "common/reduce_lesson.cuh"

namespace lesson01 {

constexpr int kBlock = 256;  // threads per block for steps 2-4

// Step 1: a single thread reads all n values. Correct, and as slow as a GPU can be: one of
// ~270,000 possible threads works, and every load waits for the one before it to be added.
__global__ void sum_one_thread(const float* x, std::size_t n, float* out) {
  float s = 0.f;
  for (std::size_t i = 0; i < n; ++i) s += x[i];
  *out = s;
}

// Step 2: one thread per element, each adding its value straight into the result. All threads
// read in parallel now, but n atomics on one address queue up one after another in L2.
__global__ void sum_atomic_per_element(const float* x, std::size_t n, float* out) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) atomicAdd(out, x[i]);
}

// Step 3: a grid just large enough to fill the GPU; each thread strides through the array
// summing into a register, then makes one atomic. n atomics become (threads in the grid).
__global__ void sum_grid_stride(const float* x, std::size_t n, float* out) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float s = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) s += x[i];
  atomicAdd(out, s);
}

// Step 4: as step 3, then the block's threads add their partials in shared memory (a tree that
// halves the active threads each round) and one thread per block makes the atomic: 256x fewer.
// Lesson 03 is all about making this tree fast.
__global__ void sum_block_atomic(const float* x, std::size_t n, float* out) {
  __shared__ float partial[kBlock];
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  float s = 0.f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

// ---- launchers: (input, n, output, scratch for libraries, stream) --------------------------------

using kl::Scratch;

// Enough blocks to fill every SM (8 blocks of 256 threads = 2048, the SM's thread limit), but
// never more blocks than there are elements to give them.
inline unsigned fill_grid(std::size_t n) {
  const std::size_t needed = (n + kBlock - 1) / kBlock;
  const std::size_t full = std::size_t(kl::sm_count()) * (2048 / kBlock);
  return static_cast<unsigned>(needed < full ? (needed > 0 ? needed : 1) : full);
}

inline void launch_one_thread(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  sum_one_thread<<<1, 1, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

inline void launch_atomic_per_element(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));  // the atomics accumulate into out
  if (n == 0) return;
  sum_atomic_per_element<<<static_cast<unsigned>((n + kBlock - 1) / kBlock), kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

inline void launch_grid_stride(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));
  sum_grid_stride<<<fill_grid(n), kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

inline void launch_block_atomic(const float* x, std::size_t n, float* out, Scratch&, cudaStream_t s) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float), s));
  sum_block_atomic<<<fill_grid(n), kBlock, 0, s>>>(x, n, out);
  CUDA_CHECK_LAUNCH();
}

inline constexpr kl::SumStep kSteps[] = {
    {"one_thread", "one thread reads and adds all n values", launch_one_thread, false, true, true},
    {"atomic_per_element", "every thread atomicAdds its element into the result", launch_atomic_per_element, false, false, true},
    {"grid_stride", "grid-stride partial per thread, one atomicAdd per thread", launch_grid_stride, false, false},
    {"block_atomic", "shared-memory block sum, one atomicAdd per block", launch_block_atomic, false, false},
    {"cub", "cub::DeviceReduce::Sum", kl::launch_cub_sum, true, true},
};

// The lesson as the shared driver (common/reduce_lesson.cuh) and checks (common/sum_checks.hpp) see it.
inline const kl::SumLesson kLesson{"01", "naive reductions", kSteps, static_cast<int>(std::size(kSteps))};

}  // namespace lesson01
